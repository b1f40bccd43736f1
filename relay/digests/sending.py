"""The digest stages of the delivery pipeline (docs/quiet-hours.md, "Digests"): gather a delivery into its route's
open digest, and send a digest as one message when its window ends (or it is full, or released). A digest is a
delivery record of its own, due at its window's end, made due before it exists: no worker waits, and what it carries
lives in Redis (`relay.digests.store`)."""

from __future__ import annotations

import json
import logging
import time
from dataclasses import replace

from relay.config import ChannelConfig, DigestConfig
from relay.core.model import Delivery, Notification, State, iso
from relay.core.names import channel_label
from relay.core.rendering import Rendered
from relay.delivery.channels import AddressError, address_url, channel_format, send
from relay.delivery.compose import compose, fitted_title, note_sent
from relay.delivery.context import Context
from relay.delivery.recording import decide, fresh, store
from relay.digests.model import (
    DIGEST_TEMPLATE,
    DigestItem,
    digest_id,
    digest_of,
    gather_key,
    group_of,
    render_digest,
    window_for,
)
from relay.outages import sending as outages
from relay.preferences.sending import links

log = logging.getLogger("relay.delivery.jobs")


def gather(rt: Context, record: Delivery, previous: State, digest: DigestConfig, ctx: dict[str, str]) -> str:
    """Join the delivery to its route's open digest for this channel (and address), or open one."""
    key = _gather_key(rt, record, digest)
    window = window_for(digest, was_held=record.notBefore is not None, released=record.released)
    at = rt.clock()  # the clock quiet hours are asked by, so a held delivery's catch-up window follows it
    new = _new_digest(rt, record, key, at, at + window)
    scheduled = False
    if rt.store.digests.open(key, at) is None:
        rt.work.deliver_at(new.id, at + window)  # its wake-up exists before the digest does
        scheduled = True
    got = rt.store.digests.gather(key, record, new, window, digest.max_items)
    if got.created and not scheduled:  # another digest closed between the look and the gathering
        rt.work.deliver_at(got.digest_id, at + window)
    record.digest, record.notBefore = got.digest_id, got.not_before
    record.state, record.lastError = State.HELD, None
    rt.store.update(record, previous)
    if got.full:
        # max_items: it goes now. Queued after the item is stored `held`, so that the digest's send, which
        # gives each item its own state, comes after; were this lost, the wake-up at the window's end sends it.
        rt.work.enqueue_deliveries([got.digest_id])
    when = "now (full)" if got.full else f"at {iso(got.not_before)}" if got.not_before else "when it closes"
    log.info("gathered into digest %s (%d so far), which goes out %s", got.digest_id, got.items, when, extra=ctx)
    return record.state


def _gather_key(rt: Context, record: Delivery, digest: DigestConfig | None) -> str:
    """The key of the digest a delivery (an item, or the digest itself) gathers in: with the digest's `key`, the
    value its notification has there too (`group_of`)."""
    group = None
    if digest is not None and digest.key:
        event = rt.store.event(record.eventId)
        group = group_of(json.loads(event.payload), digest.key) if event is not None else ""
    return gather_key(record.route or "", record.channel, record.address, record.released, group)


def _new_digest(rt: Context, item: Delivery, key: str, at: float, until: float) -> Delivery:
    """The digest `item` opens when none is open: listed with the item's event, addressed as the item."""
    return fresh(
        item,
        at,
        id=digest_id(key, item.id),
        template=DIGEST_TEMPLATE,
        state=State.HELD,
        maxAttempts=rt.config.retry.attempts,
        fallback=[],  # a digest has no fallback channels
        fallbackFor=None,
        notBefore=until,
        items=[],
        digest=None,
        trace=None,  # its own, begun by its first try, which links the traces of the items it carries
    )


def send_digest(rt: Context, record: Delivery, channel: ChannelConfig | None, ctx: dict[str, str]) -> str:
    """Close the digest, render what it carries as one message and send it; its items follow its state."""
    previous = record.state
    record.items = rt.store.digests.close(_gather_key(rt, record, digest_of(rt.config, record.route)), record.id)
    items = [r for r in rt.store.deliveries(record.items) if r is not None]
    if channel is None:
        why = f"channel {record.channel!r} is no longer configured"
        return store(rt, record, previous, State.FAILED, why, ctx, reason="config", followers=items)
    fmt = channel_format(channel.url, channel.format)
    rendered = _rendered(rt, record, items, fmt, ctx)
    if rendered is None:
        return store(rt, record, previous, State.FAILED, "event expired", ctx, reason="config", followers=items)
    try:
        url = address_url(channel.url, record.address) if record.address else channel.url
    except AddressError as exc:
        why = f"recipient address rejected: {exc}"
        return store(rt, record, previous, State.SKIPPED, why, ctx, followers=items)
    title = fitted_title(record, url, rendered.title)
    note_sent(record, title, rendered)
    record.attempts += 1
    record.attemptTimes.append(rt.clock())
    started = time.monotonic()
    with rt.tracer.span("relay.digest", None, [i.trace for i in items], **{"relay.digest.items": len(items)}):
        outcome = send(url, title, rendered.body, rendered.format, rendered.text, rt.tracer)
    took = time.monotonic() - started
    if outages.after_send(rt, record, previous, outcome, took, items):  # its channel is down: held, with its items
        return record.state
    return decide(rt, record, previous, outcome, ctx, took, followers=items)


def _rendered(rt: Context, record: Delivery, items: list[Delivery], fmt: str, ctx: dict[str, str]) -> Rendered | None:
    """One item: its own message. None when no item's event is left to render."""
    events = rt.store.events(i.eventId for i in items)
    parsed = {i: Notification.model_validate_json(e.payload) for i, e in events.items()}
    found = [(i, parsed[i.eventId], events[i.eventId].receivedAt) for i in items if i.eventId in events]
    if not found:
        return None
    # In order of arrival at relay: deliveries handed to the senders together may join in any order.
    found.sort(key=lambda f: f[2])
    first, first_notification, _ = found[0]
    person_links = links(rt, first_notification, first)  # the digest's person: its items' (one address)
    if len(found) == 1:
        item, notification, _ = found[0]
        rendered = compose(rt, item, notification, fmt, person_links)
        record.templateUsed = rendered.template
        return rendered
    gathered = []
    for item, notification, received in found:
        text = compose(rt, replace(item), notification, "txt")  # a copy: the item keeps its own template
        gathered.append(
            DigestItem(notification.kind, item.eventId, iso(received), text.title, text.body, item.recipientType)
        )
    digest = digest_of(rt.config, record.route)
    window = digest.window if digest is not None else 0.0
    shown = {k: v for k, v in person_links.items() if k == "preferences_url"}  # items of several kinds: no one-click
    shown["channel_label"] = channel_label(rt.config, record.channel)
    rendered = render_digest(
        rt.renderer, gathered, record.channel, record.address or record.recipient, window, fmt, shown
    )
    if rendered.error:
        rt.store.incr("relay_template_fallbacks_total", kind=record.kind)
        log.warning("digest template failed, relay's own used instead: %s", rendered.error, extra=ctx)
    record.templateUsed = rendered.template
    return rendered
