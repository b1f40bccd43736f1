"""One try of one leased delivery, as a short pipeline: claim, address, render, send, decide, record.

Runs in a sender thread (`relay.delivery.sender`). Every decision is a pure function of the core
(`relay.core.lookup.after_look_up`, `relay.core.outcome.next_step`, `relay.core.lookup.fallback_channels`);
this module only reads and writes what they decide. Order matters for at-least-once: anything a new state
depends on (a retry's scheduled job, a fallback's or a group member's deliveries) is queued before the
state is stored, and storing the state is what lets go of the lease.
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from relay.core.lookup import Expand, Skip, after_look_up, fallback_channels
from relay.core.model import Notification, PlannedDelivery, State
from relay.core.outcome import Delivered, Outcome, Transient, next_step
from relay.core.quiet import held_until
from relay.delivery.catalog import CatalogUnavailable
from relay.delivery.channels import AddressError, address_url, channel_format, send
from relay.runtime.bootstrap import Runtime
from relay.storage.store import DeliveryRecord, StateChange, delivery_id, iso, now

log = logging.getLogger("relay.delivery.jobs")
LOCK_MARGIN = 30
SLOT_SLACK = 0.05  # seconds: a slot this close is taken at once
MAX_SLOT_SLEEP = 1.5
# Still to be sent: a held delivery too, once its scheduled job wakes it (relay.delivery.jobs).
OPEN = (State.QUEUED.value, State.RETRYING.value, State.HELD.value)


def lock_ttl(rt: Runtime) -> int:
    return int(rt.config.send_timeout) + LOCK_MARGIN


def run(rt: Runtime, record: DeliveryRecord | str, notification: Notification | None, slot_at: float | None) -> str:
    """Try a leased delivery once (a record fresh from planning, or the id of one); returns its state."""
    current = _claim(rt, record)
    if current is None:
        return "locked"
    try:
        if current.state not in OPEN:
            return current.state
        if current.state == State.HELD.value and _held_again(rt, current):
            return current.state
        if _throttled(rt, current, slot_at):
            return "throttled"
        return _attempt(rt, current, notification)
    finally:
        # An attempt that stored an outcome let go of the lock and lease with it; anything else does here.
        _let_go(rt, current)


def _claim(rt: Runtime, record: DeliveryRecord | str) -> DeliveryRecord | None:
    """The record as it is now, with its send lock held; None when another worker holds the lock (then it
    is looked at again when that lock ends, and this worker's lease is let go)."""
    if isinstance(record, DeliveryRecord) and record.held_lock:
        return record  # created and locked by the planning job a moment ago
    ident = record.id if isinstance(record, DeliveryRecord) else record
    taken, current = rt.store.lock_and_read(ident, lock_ttl(rt))
    if not taken:
        rt.intake.retry_later(ident, lock_ttl(rt), int(now()))
        rt.store.leases.release([ident], rt.store.owner)
        return None
    if current is None:  # expired meanwhile
        rt.store.unlock(ident)
        rt.store.leases.release([ident], rt.store.owner)
        return None
    current.held_lease = True
    return current


def _let_go(rt: Runtime, record: DeliveryRecord) -> None:
    if record.held_lock:
        rt.store.unlock(record.id)
        record.held_lock = False
    if record.held_lease:
        rt.store.leases.release([record.id], rt.store.owner)
        record.held_lease = False


def _held_again(rt: Runtime, record: DeliveryRecord) -> bool:
    """A held delivery's wake-up asks its route's intervals again under the config as it is now (a reload
    may have moved them): still held, it is scheduled anew and stays held; else it is sent now."""
    until = held_until(rt.config, record.route, datetime.fromtimestamp(rt.clock(), UTC))
    if until is None:
        return False
    record.notBefore = until.timestamp()
    rt.intake.deliver_at(record.id, record.notBefore, again=True)  # scheduled before the state is stored
    rt.store.update(record, record.state)
    log.info(
        "delivery still held by quiet hours, until %s",
        iso(record.notBefore),
        extra={"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel},
    )
    return True


def _throttled(rt: Runtime, record: DeliveryRecord, slot_at: float | None) -> bool:
    """A rate-limited channel: book the next slot; one that is not near waits as a scheduled job."""
    channel = rt.config.channels.get(record.channel)
    if channel is not None and channel.rate and slot_at is None:
        wait = rt.store.reserve_slot(record.channel, channel.rate)
        if wait > SLOT_SLACK:
            rt.intake.retry_later(record.id, wait, int(now() * 1000), slot_at=now() + wait)
            return True
    if slot_at is not None and 0 < slot_at - now() <= MAX_SLOT_SLEEP:
        # RQ schedules in whole seconds, so the job may run up to a second before its slot.
        time.sleep(slot_at - now())
    return False


def _attempt(rt: Runtime, record: DeliveryRecord, notification: Notification | None) -> str:
    ctx = {"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel}
    previous = record.state
    if notification is None:
        event = rt.store.event(record.eventId)
        notification = Notification.model_validate_json(event.payload) if event is not None else None
    channel = rt.config.channels.get(record.channel)
    if notification is None or channel is None:
        reason = "event expired" if notification is None else f"channel {record.channel!r} is no longer configured"
        return _store(rt, record, previous, State.FAILED, reason, ctx, reason="config")
    if channel.per_recipient and not record.address:
        ended = _address(rt, record, previous, ctx)
        if ended is not None:
            return ended
    message = notification.messages[record.messageIndex]
    recipient = None
    if record.recipientIndex is not None and record.recipientIndex < len(message.recipients):
        recipient = message.recipients[record.recipientIndex]
    planned = PlannedDelivery(
        message_index=record.messageIndex,
        recipient_type=record.recipientType,
        channel=record.channel,
        template=record.template,
        recipient=recipient,
        recipient_ref=record.recipient,
        address=record.address,
        recipient_index=record.recipientIndex,
    )
    rendered = rt.renderer.render(notification, planned, channel_format(channel.url, channel.format))
    if rendered.error:
        rt.store.incr("relay_template_fallbacks_total", kind=record.kind)
        log.warning(
            "template failed, sent the platform's text instead: %s",
            rendered.error,
            extra={**ctx, "template": rendered.template},
        )
    record.template = rendered.template  # the template actually used, as `relay preview` names it
    title = rendered.title
    if record.fallbackFor:
        title = f"[not delivered through its main channel] {title}"
    try:
        url = address_url(channel.url, record.address) if record.address else channel.url
    except AddressError as exc:
        return _store(rt, record, previous, State.SKIPPED, f"recipient address rejected: {exc}", ctx)
    record.attempts += 1
    record.attemptTimes.append(now())
    started = time.monotonic()
    outcome = send(url, title, rendered.body, rendered.format, rendered.text)
    return _decide(rt, record, previous, outcome, ctx, time.monotonic() - started)


def _address(rt: Runtime, record: DeliveryRecord, previous: str, ctx: dict[str, str]) -> str | None:
    """Find a per-recipient delivery's address in the platform catalog: None when it now has one, else the
    state it ended in (retrying while the platform is down, skipped, or expanded for a group)."""
    ref = record.recipient
    if rt.catalog is None or not ref:
        return _store(rt, record, previous, State.SKIPPED, "recipient has no e-mail address", ctx)
    try:
        emails = rt.catalog.emails(ref)
    except CatalogUnavailable as exc:
        record.attempts += 1
        record.attemptTimes.append(now())
        return _decide(rt, record, previous, Transient(f"platform catalog look-up of {ref} failed: {exc}"), ctx)
    found = after_look_up(ref, emails)
    if isinstance(found, Skip):
        return _store(rt, record, previous, State.SKIPPED, found.reason, ctx)
    if isinstance(found, Expand):
        members = [_derived(record, a.lower(), recipient=a, address=a) for a in found.addresses]
        _queue_new(rt, record.eventId, members)
        record.members = [m.id for m in members]
        reason = f"group {ref} expanded into {len(members)} member deliveries"
        return _store(rt, record, previous, State.EXPANDED, reason, ctx)
    record.address = found.address
    return None


def _decide(
    rt: Runtime,
    record: DeliveryRecord,
    previous: str,
    outcome: Outcome,
    ctx: dict[str, str],
    took: float | None = None,
) -> str:
    step = next_step(outcome, record.attempts, record.maxAttempts, rt.config.retry.backoff)
    record.state, record.lastError = step.state.value, step.reason
    if isinstance(outcome, Delivered):
        # From when it could go: the time a delivery was held by quiet hours is not latency.
        since = max(record.createdAt, record.notBefore or 0.0)
        rt.store.update_many([StateChange(record, previous, latency_from=since, send_seconds=took)])
        log.info("delivered", extra={**ctx, "state": record.state, "template": record.template})
        return record.state
    kind = "transient" if isinstance(outcome, Transient) else "permanent"
    if step.state == State.RETRYING and step.retry_in is not None:
        rt.intake.retry_later(record.id, step.retry_in, record.attempts)  # queued before the state is stored
        rt.store.update(record, previous, send_seconds=took, reason=kind)
        log.info("failed, retrying in %gs: %s", step.retry_in, record.lastError, extra={**ctx, "state": record.state})
        return record.state
    extra = fallback_channels(record.fallback, record.fallbackFor is not None, set(rt.config.channels))
    if extra:
        _queue_new(rt, record.eventId, [_fallback(rt, record, name) for name in extra])
    rt.store.update(record, previous, send_seconds=took, reason=kind)
    log.warning("delivery failed: %s", record.lastError, extra={**ctx, "state": record.state})
    return record.state


def _store(
    rt: Runtime, record: DeliveryRecord, previous: str, state: State, why: str, ctx: dict[str, str], reason: str = ""
) -> str:
    record.state, record.lastError = state.value, why
    rt.store.update_many([StateChange(record, previous, labels={"reason": reason} if reason else {})])
    if state == State.FAILED:
        log.warning("delivery failed: %s", why, extra=ctx)
    else:
        log.info("delivery %s: %s", state.value, why, extra=ctx)
    return record.state


def _fallback(rt: Runtime, record: DeliveryRecord, name: str) -> DeliveryRecord:
    per_recipient = rt.config.channels[name].per_recipient
    return _derived(
        record,
        name,
        channel=name,
        fallback=[],
        fallbackFor=record.id,
        address=record.address if per_recipient else None,
    )


def _derived(record: DeliveryRecord, key: str, **changes: Any) -> DeliveryRecord:
    """A new delivery born of `record` (a group member, a fallback), with a stable id of its own."""
    ts = now()
    return replace(
        record,
        id=delivery_id(record.eventId, record.messageIndex, f"{record.channel}>{key}", record.recipientIndex),
        state=State.QUEUED.value,
        attempts=0,
        lastError=None,
        createdAt=ts,
        updatedAt=ts,
        attemptTimes=[],
        members=[],
        notBefore=None,  # born when its parent was sent: nothing holds it
        **changes,
    )


def _queue_new(rt: Runtime, event_id: str, records: list[DeliveryRecord]) -> None:
    stored = rt.store.create_deliveries(event_id, records)
    rt.intake.enqueue_deliveries([r.id for r in stored if r.state in OPEN])
