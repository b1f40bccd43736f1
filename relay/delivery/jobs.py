"""The two RQ jobs: plan a notification into deliveries, and send one delivery."""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from functools import cache
from typing import Any

from redis import Redis
from rq.job import Job

from relay.core.model import Notification, PlannedDelivery, State
from relay.core.routing import plan_notification
from relay.delivery.catalog import CatalogUnavailable
from relay.delivery.channels import AddressError, address_url, channel_format, send
from relay.runtime.bootstrap import Runtime, runtime
from relay.storage.store import DeliveryRecord, EventRecord, Outcome, delivery_id, now

log = logging.getLogger("relay.delivery.jobs")
LOCK_MARGIN = 30
SLOT_SLACK = 0.05  # seconds: a slot this close is taken at once
# A planning job sends this many of its deliveries itself (the rest become jobs), with a pool of threads
# shared by the process; sends mostly wait on the network.
INLINE_MAX = 8
INLINE_THREADS = 32
PRUNE_SHARE = 0.01  # planning jobs that also drop expired index entries
MAX_SLOT_SLEEP = 1.5
_OPEN = (State.QUEUED.value, State.RETRYING.value)


def _record(rt: Runtime, event_id: str, kind: str, planned: PlannedDelivery) -> DeliveryRecord:
    ts = now()
    skipped = planned.skip_reason is not None
    return DeliveryRecord(
        id=delivery_id(event_id, planned.message_index, planned.channel, planned.recipient_index),
        eventId=event_id,
        kind=kind,
        messageIndex=planned.message_index,
        recipientType=planned.recipient_type,
        recipient=planned.recipient_ref or planned.address,
        address=planned.address,
        channel=planned.channel,
        template=planned.template,
        state=State.SKIPPED.value if skipped else State.QUEUED.value,
        attempts=0,
        maxAttempts=rt.config.retry.attempts,
        lastError=planned.skip_reason,
        createdAt=ts,
        updatedAt=ts,
        fallback=list(planned.fallback),
        attemptTimes=[],
        recipientIndex=planned.recipient_index,
        route=planned.route,
    )


_prefetched = threading.local()


def prefetch(event_id: str, event: EventRecord | None) -> None:
    """The event of the planning job this thread is about to run, read by the worker along with the
    job's start (one round trip fewer); taken by that job only."""
    _prefetched.event = (event_id, event)


def _event(rt: Runtime, event_id: str) -> EventRecord | None:
    found: tuple[str, EventRecord | None] | None = getattr(_prefetched, "event", None)
    _prefetched.event = None
    if found is not None and found[0] == event_id:
        return found[1]
    return rt.store.event(event_id)


def plan_job(event_id: str) -> int:
    """Turn a stored notification into delivery records and jobs; safe to run again after a crash."""
    rt = runtime()
    event = _event(rt, event_id)
    if event is None:
        log.warning("event expired before it was planned", extra={"eventId": event_id})
        return 0
    notification = Notification.model_validate_json(event.payload)
    records = [_record(rt, event_id, notification.kind, p) for p in plan_notification(rt.config, notification)]
    # The first deliveries are sent here: their send locks are taken as they are created (one round
    # trip). A rate-limited channel's first books its slot instead, so it is locked when it sends.
    first = [r for r in records if r.state in _OPEN][:INLINE_MAX]
    to_lock = {r.id for r in first if not _rate_limited(rt, r)}
    stored = rt.store.create_deliveries(event_id, records, lock=(_lock_owner(), _lock_ttl(rt), to_lock))
    for record in stored:
        if record.state == State.SKIPPED.value:
            log.info(
                "delivery skipped: %s",
                record.lastError,
                extra={"eventId": event_id, "deliveryId": record.id, "channel": record.channel},
            )
    ready = [r for r in stored if r.state in _OPEN]
    for later in ready[INLINE_MAX:]:
        if later.held_lock:  # not sent here after all (an earlier run's records came first): let go
            rt.store.unlock(later.id)
            later.held_lock = False
    rt.intake.enqueue_deliveries([r.id for r in ready[INLINE_MAX:]])
    _send_inline(rt, ready[:INLINE_MAX], notification)
    if not records:
        log.info("no route for this notification", extra={"eventId": event_id, "kind": notification.kind})
    if random.random() < PRUNE_SHARE:
        rt.store.prune()
    return len(records)


def _send_inline(rt: Runtime, records: list[DeliveryRecord], notification: Notification) -> None:
    """The first deliveries of a fresh event are sent by its planning job, side by side: no queue hop and
    no job each. Each keeps its own record, lock and retries; one that cannot run here becomes a job."""
    if not records:
        return
    # Deliveries sent here are stored in one round trip once all are done (each keeps its send lock until
    # then); any other outcome (a retry to schedule, a fallback) is stored at once, as a job's would be.
    delivered: list[Outcome] = []
    # The first one goes in this thread: no hand-over for the common notification of one delivery.
    futures = [
        (record, _inline_pool().submit(_deliver, rt, record, None, notification, delivered)) for record in records[1:]
    ]
    _inline_one(rt, records[0], lambda: _deliver(rt, records[0], None, notification, delivered))
    for record, future in futures:
        _inline_one(rt, record, future.result)
    rt.store.update_many(delivered)


def _inline_one(rt: Runtime, record: DeliveryRecord, run: Callable[[], object]) -> None:
    try:
        run()
    except Exception:
        log.exception("inline send failed; the delivery goes to the queue", extra={"deliveryId": record.id})
        rt.intake.enqueue_deliveries([record.id])


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _inline_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=INLINE_THREADS, thread_name_prefix="relay-inline")
        return _pool


def _lock_owner() -> str:
    return _owner(os.getpid())


@cache
def _owner(pid: int) -> str:
    # Asked once per process (by pid, so a forked child names itself), not once per delivery.
    return f"{socket.gethostname()}:{pid}"


def _lock_ttl(rt: Runtime) -> int:
    return int(rt.config.send_timeout) + LOCK_MARGIN


def _rate_limited(rt: Runtime, record: DeliveryRecord) -> bool:
    channel = rt.config.channels.get(record.channel)
    return channel is not None and channel.rate is not None


def deliver_job(delivery_id_: str, slot_at: float | None = None) -> str:
    """Send one delivery once; a delivered, skipped or failed one is left alone.

    `slot_at`: the time of a rate-limit slot the delivery booked; it sends then, without booking again.
    """
    rt = runtime()
    return _deliver(rt, rt.store.delivery(delivery_id_), slot_at)


def _deliver(
    rt: Runtime,
    record: DeliveryRecord | None,
    slot_at: float | None = None,
    notification: Notification | None = None,
    delivered: list[Outcome] | None = None,
) -> str:
    """`delivered`: where a successful outcome goes to be stored later, with the send lock held until
    then (by default it is stored at once)."""
    if record is None or record.state not in _OPEN:
        return record.state if record else "missing"
    delivery_id_ = record.id
    channel = rt.config.channels.get(record.channel)
    if channel is not None and channel.rate and slot_at is None:
        wait = rt.store.reserve_slot(record.channel, channel.rate)
        if wait > SLOT_SLACK:
            # Over the channel's rate: wait in the scheduled queue for the booked slot, holding no worker.
            rt.intake.retry_later(record.id, wait, int(now() * 1000), slot_at=now() + wait)
            return "throttled"
    if slot_at is not None and 0 < slot_at - now() <= MAX_SLOT_SLEEP:
        # RQ schedules in whole seconds, so the job may run up to a second before its slot.
        time.sleep(slot_at - now())
    current: DeliveryRecord | None = record
    taken = record.held_lock  # created and locked by this planning job a moment ago
    if not taken:
        taken, current = rt.store.lock_and_read(record.id, _lock_owner(), _lock_ttl(rt))
    if not taken:
        # Another worker is sending it right now (or died doing so): look again when its lock ends.
        rt.intake.retry_later(record.id, _lock_ttl(rt), int(now()))
        return "locked"
    deferred = False
    try:
        if current is None or current.state not in _OPEN:
            return current.state if current else "missing"
        state = _attempt(rt, current, notification, delivered)
        deferred = delivered is not None and state == State.DELIVERED.value
        return state
    finally:
        # A lock not released by the update that stored the outcome is released here, unless that
        # update is still to come.
        if not deferred and (current is None or current.held_lock):
            rt.store.unlock(delivery_id_)


def _attempt(
    rt: Runtime,
    record: DeliveryRecord,
    notification: Notification | None = None,
    delivered: list[Outcome] | None = None,
) -> str:
    ctx = {"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel}
    previous = record.state
    if notification is None:
        event = rt.store.event(record.eventId)
        notification = Notification.model_validate_json(event.payload) if event is not None else None
    channel = rt.config.channels.get(record.channel)
    if notification is None or channel is None:
        record.state = State.FAILED.value
        record.lastError = (
            "event expired" if notification is None else f"channel {record.channel!r} is no longer configured"
        )
        rt.store.update(record, previous, reason="config")
        log.warning("delivery failed: %s", record.lastError, extra=ctx)
        return record.state
    message = notification.messages[record.messageIndex]
    recipient = None
    if record.recipientIndex is not None and record.recipientIndex < len(message.recipients):
        recipient = message.recipients[record.recipientIndex]
    if channel.per_recipient and not record.address:
        outcome = _look_up(rt, record, previous, ctx)
        if outcome is not None:
            return outcome
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
    fmt = channel_format(channel.url, channel.format)
    rendered = rt.renderer.render(notification, planned, fmt)
    if rendered.error:
        rt.store.incr("relay_template_fallbacks_total", kind=record.kind)
        log.warning(
            "template failed, sent the platform's text instead: %s",
            rendered.error,
            extra={**ctx, "template": rendered.template},
        )
    title = rendered.title
    if record.fallbackFor:
        title = f"[not delivered through its main channel] {title}"
    try:
        url = address_url(channel.url, record.address) if record.address else channel.url
    except AddressError as exc:
        record.state = State.SKIPPED.value
        record.lastError = f"recipient address rejected: {exc}"
        rt.store.update(record, previous)
        return record.state
    record.attempts += 1
    record.attemptTimes.append(now())
    started = time.monotonic()
    result = send(url, title, rendered.body, rendered.format, rendered.text)
    took = time.monotonic() - started
    if result.ok:
        record.state = State.DELIVERED.value
        record.lastError = None
        stored = Outcome(record, previous, latency_from=record.createdAt, send_seconds=took)
        if delivered is not None:
            delivered.append(stored)
        else:
            rt.store.update_many([stored])
        log.info("delivered", extra={**ctx, "state": record.state, "template": rendered.template})
        return record.state
    record.lastError = result.error
    return _retry_or_fail(rt, record, previous, result.transient, result.retry_after, ctx, took)


def _retry_or_fail(
    rt: Runtime,
    record: DeliveryRecord,
    previous: str,
    transient: bool,
    retry_after: float | None,
    ctx: dict[str, str],
    send_seconds: float | None = None,
) -> str:
    """After a failed try: retry with backoff while tries are left and it may help, else failed."""
    if transient and record.attempts < record.maxAttempts:
        record.state = State.RETRYING.value
        delay = rt.config.retry.delay_after(record.attempts)
        if retry_after is not None:
            # The service said how long: wait that long, no less. RQ schedules in whole seconds,
            # rounding down: one more second keeps the retry from running before that time.
            delay = retry_after + 1.0
        rt.store.update(record, previous, send_seconds=send_seconds, reason="transient")
        rt.intake.retry_later(record.id, delay, record.attempts)
        log.info("failed, retrying in %gs: %s", delay, record.lastError, extra={**ctx, "state": record.state})
        return record.state
    record.state = State.FAILED.value
    rt.store.update(record, previous, send_seconds=send_seconds, reason="transient" if transient else "permanent")
    log.warning("delivery failed: %s", record.lastError, extra={**ctx, "state": record.state})
    _fall_back(rt, record)
    return record.state


def _look_up(rt: Runtime, record: DeliveryRecord, previous: str, ctx: dict[str, str]) -> str | None:
    """Find a per-recipient delivery's address in the platform catalog.

    None when the record now has an address to send to; else the state it ended in (retrying when
    the platform is down, skipped when it knows no address, skipped as expanded for a group).
    """
    ref = record.recipient
    if rt.catalog is None or not ref:
        record.state = State.SKIPPED.value
        record.lastError = "recipient has no e-mail address"
        rt.store.update(record, previous)
        return record.state
    try:
        emails = rt.catalog.emails(ref)
    except CatalogUnavailable as exc:
        record.attempts += 1
        record.attemptTimes.append(now())
        record.lastError = f"platform catalog look-up of {ref} failed: {exc}"
        return _retry_or_fail(rt, record, previous, True, None, ctx)
    if ref.lower().startswith("group:"):
        return _expand_group(rt, record, previous, emails)
    if not emails:
        record.state = State.SKIPPED.value
        record.lastError = f"no e-mail address for {ref} in the platform catalog"
        rt.store.update(record, previous)
        log.info("delivery skipped: %s", record.lastError, extra=ctx)
        return record.state
    record.address = emails[0]
    return None


def _expand_group(rt: Runtime, record: DeliveryRecord, previous: str, emails: list[str]) -> str:
    """One delivery per member of a group; the group's own record says what became of it."""
    members = [_derived(record, email.lower(), recipient=email, address=email) for email in emails]
    _send_new(rt, record.eventId, members)
    record.state = State.SKIPPED.value
    record.lastError = (
        f"group {record.recipient} expanded into {len(members)} member deliveries"
        if members
        else f"group {record.recipient} has no member with an e-mail address in the platform catalog"
    )
    rt.store.update(record, previous)
    return record.state


def _fall_back(rt: Runtime, record: DeliveryRecord) -> None:
    """A route's `fallback:` channels get the message when its delivery is given up."""
    if not record.fallback or record.fallbackFor:
        return
    extra = [
        _derived(
            record,
            name,
            channel=name,
            fallback=[],
            fallbackFor=record.id,
            address=record.address if rt.config.channels[name].per_recipient else None,
        )
        for name in record.fallback
        if name in rt.config.channels
    ]
    _send_new(rt, record.eventId, extra)


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
        **changes,
    )


def _send_new(rt: Runtime, event_id: str, records: list[DeliveryRecord]) -> None:
    stored = rt.store.create_deliveries(event_id, records)
    rt.intake.enqueue_deliveries([r.id for r in stored if r.state in _OPEN])


def delivery_job_failed(job: Job, connection: Redis, exc_type: type, exc: BaseException, tb: Any) -> None:
    """RQ's failure callback: once a delivery job crashed or timed out with no RQ retry left, the
    delivery is marked failed with the reason, so it shows up and can be replayed."""
    if job.retries_left:
        return
    delivery = str(job.args[0]) if job.args else ""
    rt = runtime()
    record = rt.store.delivery(delivery)
    if record is None or record.state not in _OPEN:
        return
    previous = record.state
    record.state = State.FAILED.value
    # The exception text may hold a URL; its type says enough (the worker's log has the rest).
    record.lastError = f"the delivery job crashed or timed out on every try ({exc_type.__name__})"
    rt.store.update(record, previous, reason="crash")
    log.error(
        "delivery job failed for good: %s",
        exc_type.__name__,
        extra={"eventId": record.eventId, "deliveryId": record.id, "channel": record.channel},
    )
