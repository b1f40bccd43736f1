"""The title and body of one delivery, rendered in the channel's format (`relay.core.rendering`); a template
that failed (or broke a limit) is counted and logged, and the platform's text used. The title is cut to what
the channel takes (`relay.core.titles`) just before it is sent."""

from __future__ import annotations

import logging
from typing import Any

from relay.core.model import Delivery, Message, Notification
from relay.core.rendering import PLATFORM, Rendered
from relay.core.titles import fit_title
from relay.delivery.channels import redact, scheme_of
from relay.delivery.context import Context
from relay.delivery.names import catalog_lookup, remember_names
from relay.preferences.sending import link_tokens

log = logging.getLogger("relay.delivery.jobs")


def compose(
    rt: Context, record: Delivery, notification: Notification, fmt: str, extra: dict[str, Any] | None = None
) -> Rendered:
    """The file used is noted in `record.templateUsed`, never in the choice. `extra`: more context (the person's
    links); names come from the payload, else the catalog."""
    with rt.tracer.span("relay.render", **{"relay.format": fmt}) as span:
        rendered = rt.renderer.render(notification, record, fmt, extra, catalog_lookup(rt.catalog))
        span.set("relay.template", rendered.template)
    if extra and "preferences_url" in extra:
        remember_names(rt.redis, notification, record)
    if rendered.error:
        rt.store.incr("relay_template_fallbacks_total", kind=record.kind)
        log.warning(
            "template failed, sent the platform's text instead: %s",
            rendered.error,
            extra={"eventId": record.eventId, "deliveryId": record.id, "template": rendered.template},
        )
    record.templateUsed = rendered.template  # as `relay preview` names it
    return rendered


def fitted_title(record: Delivery, url: str, title: str) -> str:
    """Every attempt cuts it the same way; the first says so in the log."""
    scheme = scheme_of(url)
    fitted = fit_title(title, scheme)
    if fitted != title and record.attempts == 0:
        log.info(
            "title cut from %d to %d characters, as a %s channel takes it",
            len(title),
            len(fitted),
            scheme,
            extra={"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel},
        )
    return fitted


MAX_SENT_TEXT = 8_000  # characters of the sent text a delivery's record keeps


def note_sent(
    record: Delivery, title: str, rendered: Rendered, links: dict[str, Any] | None = None, given: Message | None = None
) -> None:
    """Keep what this try sends on the record, bounded, the person's link tokens scrubbed (each is a password to
    their preferences); the platform's own text (`given`) is not kept twice: the payload has it."""
    text = rendered.text if rendered.text is not None else rendered.body
    tokens = link_tokens(links or {})
    text = redact(text, tokens)
    record.sentTitle = redact(title, tokens)[:1000]
    record.sentText = text if len(text) <= MAX_SENT_TEXT else text[: MAX_SENT_TEXT - 1] + "…"
    if rendered.template == PLATFORM and given is not None:
        record.sentTitle = None if record.sentTitle == given.title else record.sentTitle
        record.sentText = None if record.sentText == given.message else record.sentText
