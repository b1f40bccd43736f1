"""One try of one leased delivery, as a short pipeline (docs/development.md, "Architecture"): read, the gates,
address, gather, render, send, decide, record. Every decision is the core's (pure) or a gate's; this module only
reads and writes what they decide. Order matters for at-least-once: anything a new state depends on (a retry's
scheduled job, a fallback's or a group member's deliveries) is made due before the state is stored, and storing the
state is what lets go of the lease."""

from __future__ import annotations

import logging
import time

from relay.core.lookup import Expand, Skip, after_look_up, unusable_ref
from relay.core.model import Delivery, Notification
from relay.core.outcome import Transient
from relay.core.states import OPEN, State
from relay.delivery.catalog import CatalogUnavailable
from relay.delivery.channels import AddressError, address_url, channel_format, send
from relay.delivery.compose import compose, fitted_title, note_sent
from relay.delivery.context import Context
from relay.delivery.gates import Due, through
from relay.delivery.recording import decide, derived, log_context, queue_new, store
from relay.digests import sending as digests
from relay.digests.model import digest_of
from relay.outages import sending as outages
from relay.preferences.sending import links, with_unsubscribe_headers
from relay.storage.leases import delivery_unit
from relay.threads import sending as threads

log = logging.getLogger("relay.delivery.jobs")


def run(rt: Context, record: Delivery | str, notification: Notification | None, slot_at: float | None) -> str:
    """Try a leased delivery once (a record fresh from planning, or its id); its state."""
    rt = rt.pinned()  # one config, renderer and catalog for the whole try
    current = _read(rt, record)
    if current is None:
        return "expired"
    # An attempt that stored an outcome let go of the lease with it; any other end does here. One that raised
    # keeps it: the caller counts the loss (`relay.delivery.jobs`).
    state = _steps(rt, Due(rt, current, slot_at, notification))
    if current.held_lease:
        rt.store.leases.release([delivery_unit(current.id)], rt.store.owner)
        current.held_lease = False
    threads.moved_on(rt, current)  # after its state is stored: the next of its conversation may go
    return state


def _steps(rt: Context, due: Due) -> str:
    if due.record.state not in OPEN:
        return due.record.state
    stopped = through(due)
    if stopped is not None:
        return stopped
    with rt.tracer.attempt(due.record):  # a span in its notification's trace (relay.tracing)
        return _attempt(rt, due)


def _read(rt: Context, record: Delivery | str) -> Delivery | None:
    """The record as it is now (one fresh from planning is); None when it expired (its lease let go)."""
    if isinstance(record, Delivery):
        return record
    current = rt.store.delivery(record)
    if current is None:
        rt.store.leases.release([delivery_unit(record)], rt.store.owner)
        return None
    current.held_lease = True
    return current


def _attempt(rt: Context, due: Due) -> str:
    record = due.record
    ctx = log_context(record)
    previous = record.state
    if record.items:
        return digests.send_digest(rt, record, rt.config.channels.get(record.channel), ctx)
    notification = due.notification  # read once, when the gates did not (a digest renders its items' instead)
    channel = rt.config.channels.get(record.channel)
    if notification is None or channel is None:
        reason = "event expired" if notification is None else f"channel {record.channel!r} is no longer configured"
        return store(rt, record, previous, State.FAILED, reason, ctx, reason="config")
    if channel.per_recipient and not record.address:
        ended = _address(rt, record, previous, ctx)
        if ended is not None:
            return ended
    digest = digest_of(rt.config, record.route)
    if digest is not None and not record.fallbackFor:
        return digests.gather(rt, record, previous, digest, ctx)
    extra = links(rt, notification, record)  # the person's own links, in the message and the e-mail's headers
    rendered = compose(rt, record, notification, channel_format(channel.url, channel.format), extra)
    title = rendered.title
    if record.fallbackFor:
        title = f"[not delivered through its main channel] {title}"
    try:
        url = address_url(channel.url, record.address) if record.address else channel.url
    except AddressError as exc:
        return store(rt, record, previous, State.SKIPPED, f"recipient address rejected: {exc}", ctx)
    url = with_unsubscribe_headers(url, extra)
    title = fitted_title(record, url, title)
    note_sent(record, title, rendered, extra, notification.messages[record.messageIndex])
    record.attempts += 1
    record.attemptTimes.append(rt.clock())
    started = time.monotonic()
    sent_to, mail, broadcast = threads.aim(rt, record, url, due.conversation)
    outcome = send(
        sent_to, title, rendered.body, rendered.format, rendered.text, rt.tracer, mail=mail, broadcast=broadcast
    )
    took = time.monotonic() - started
    threads.sent(rt, record, due.conversation, outcome, url)  # noted before its state is stored
    if outages.after_send(rt, record, previous, outcome, took, []):
        return record.state
    return decide(rt, record, previous, outcome, ctx, took)


def _address(rt: Context, record: Delivery, previous: State, ctx: dict[str, str]) -> str | None:
    """None when it now has an address, else the state it ended in (retrying, skipped, expanded for a group)."""
    ref = record.recipient
    if rt.catalog is None or not ref:
        return store(rt, record, previous, State.SKIPPED, "recipient has no e-mail address", ctx)
    refused = unusable_ref(ref)
    if refused is not None:  # never asked: its path would leave the catalog's entity path
        return store(rt, record, previous, State.SKIPPED, refused, ctx)
    try:
        emails = rt.catalog.emails(ref)
    except CatalogUnavailable as exc:
        record.attempts += 1
        record.attemptTimes.append(rt.clock())
        return decide(rt, record, previous, Transient(f"platform catalog look-up of {ref} failed: {exc}"), ctx)
    found = after_look_up(ref, emails)
    if isinstance(found, Skip):
        return store(rt, record, previous, State.SKIPPED, found.reason, ctx)
    if isinstance(found, Expand):
        members = [derived(record, a.lower(), rt.clock(), recipient=a, address=a) for a in found.addresses]
        queue_new(rt, record.eventId, members)
        record.members = [m.id for m in members]
        reason = f"group {ref} expanded into {len(members)} member deliveries"
        return store(rt, record, previous, State.EXPANDED, reason, ctx)
    record.address = found.address
    return None
