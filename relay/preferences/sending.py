"""People's preferences in the pipeline: what each person was sent, noted at planning (their page); at sending, the
links that let them choose (their preference page, one-click unsubscribe) in the template's context and the e-mail's
headers (RFC 8058). What their choices do to a delivery (skip it, hold it) is decided by the gates
(`relay.delivery.gates`) when it comes due. A link may change only its address's person (`link_person`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import quote, unquote, urlencode

from redis import Redis

from relay.config import Config
from relay.core.model import Delivery, Notification
from relay.core.redaction import EMAIL_SCHEMES
from relay.delivery.catalog import Catalog, CatalogUnavailable
from relay.delivery.channels import scheme_of
from relay.delivery.context import Context
from relay.preferences.model import claim_of_delivery, critical
from relay.preferences.store import Preferences
from relay.web.links import preferences_url, unsubscribe_url

log = logging.getLogger("relay.preferences.sending")
ONE_CLICK = "List-Unsubscribe=One-Click"


def note_people(rt: Context, notification: Notification, created: list[Delivery]) -> None:
    """Note what each person was sent (their page): a notification planned twice is noted once."""
    sent: list[tuple[str, str, str]] = []
    for record in created:  # each person's page lists it: the one a link to this address opens is among them
        sent += [(p, record.kind, record.channel) for p in claim_of_delivery(rt.config, notification, record).people()]
    if sent:
        Preferences(rt.redis).note_sent(sent, rt.clock())


class LinkContext(Protocol):
    """What the links of a delivery are made from: a `Context`, or `relay preview`'s own."""

    @property
    def config(self) -> Config: ...

    @property
    def catalog(self) -> Catalog | None: ...

    @property
    def clock(self) -> Callable[[], float]: ...

    @property
    def redis(self) -> Redis | None:
        """Where a `userRef`'s first address is bound (none in a preview, which binds nothing)."""


def links(rt: LinkContext, notification: Notification, record: Delivery) -> dict[str, Any]:
    """None without a public URL; bound to the address, so they change only its person (`link_person`)."""
    prefs = rt.config.preferences
    if not prefs.links or record.items or not record.address:
        return {}
    person = link_person(rt, notification, record)
    if person is None:
        return {}
    at = rt.clock()
    address = record.address.lower()
    found = {"preferences_url": preferences_url(prefs, person, at, address)}
    if not critical(rt.config, record.kind):  # a critical kind goes whatever one chooses: nothing to unsubscribe
        found["unsubscribe_url"] = unsubscribe_url(prefs, person, record.kind, record.channel, at, address)
    return {k: v for k, v in found.items() if v is not None}


def link_tokens(found: dict[str, Any]) -> list[str]:
    """Each is a key to that person's preferences: what shows a message after it went shows `****` instead."""
    return [str(v).rsplit("/", 1)[-1] for v in found.values()]


def link_person(rt: LinkContext, notification: Notification, record: Delivery) -> str | None:
    """Whose preferences the links in a delivery may change. Whoever reads its address gets them, and the payload's
    `userRef` is only a claim (a webhook's caller could pair anyone's `userRef` with their own address): the `userRef`
    when this address is its own (the platform catalog's, when one is configured; else the first address relay sent that
    `userRef`'s links to), else the address itself when the payload gave it (its deliveries obey what is chosen there),
    else nobody (no links: a `userRef` relay cannot key a person by, whose address came from the catalog)."""
    claim = claim_of_delivery(rt.config, notification, record)
    address = (record.address or "").lower()
    if claim.ref is not None and address and _is_their_address(rt, claim.ref, address):
        return claim.ref
    if claim.address is not None and claim.address == address:
        return claim.address
    if claim.unusable_ref:
        log.info(
            "no preference links: the recipient's userRef cannot name a person (too long, or a control character)"
            " and the payload gave no address of theirs",
            extra={"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel},
        )
    return None


def _is_their_address(rt: LinkContext, ref: str, address: str) -> bool:
    """The catalog says so when configured (not answering: no); else it is the first address bound to `ref`."""
    if rt.catalog is None:
        if rt.redis is None:  # a preview: as sending would be, once the address is bound (it binds nothing)
            return True
        return Preferences(rt.redis).bound_address(ref, address) == address
    try:
        return address in {e.lower() for e in rt.catalog.emails(ref)}
    except CatalogUnavailable as exc:
        log.info("preference links bound to the address: the catalog did not answer (%s)", exc)
        return False


def with_unsubscribe_headers(url: str, context: dict[str, Any]) -> str:
    """RFC 8058's headers through Apprise's `+Header=value` arguments; any other URL, or no link, as it is."""
    link = context.get("unsubscribe_url")
    if not link or scheme_of(url) not in EMAIL_SCHEMES:
        return url
    base, _, query = url.partition("?")
    # The channel's own arguments stay byte for byte (Apprise reads a `+` in them as a `+`, not a space).
    kept = [p for p in query.split("&") if p and not unquote(p.partition("=")[0]).lower().startswith("+list-unsub")]
    added = urlencode([("+List-Unsubscribe", f"<{link}>"), ("+List-Unsubscribe-Post", ONE_CLICK)], quote_via=quote)
    return base + "?" + "&".join([*kept, added])
