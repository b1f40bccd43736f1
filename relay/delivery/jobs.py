"""The RQ jobs: plan notifications into deliveries, and hand a delivery to this worker's senders.

The path of one notification: a planning job (`plan_batch`) claims it among those waiting
(`relay.storage.planning`); `plan_event` reads the event, plans its deliveries (`relay.core.routing`),
stores them with a lease on those this worker will send, and hands them to the senders
(`relay.delivery.sender`), which try each once (`relay.delivery.attempt`). A retry, a rate-limit slot or a
delivery beyond the first few of a notification comes back as a `deliver_job`. Jobs end fast; the sending
happens beside them, covered by the leases.
"""

from __future__ import annotations

import contextlib
import logging
import random
import time
from datetime import UTC, datetime
from typing import Any

from redis import Redis
from redis.exceptions import RedisError
from rq.job import Job

from relay.core.model import Delivery, Notification
from relay.core.quiet import held_until
from relay.core.routing import plan_notification
from relay.core.states import OPEN, SENDABLE, State
from relay.delivery import attempt
from relay.delivery.context import Context, bound
from relay.delivery.recording import follow
from relay.storage.leases import MAX_LOSSES
from relay.storage.planning import UNPLANNED
from relay.storage.store import StateChange, iso, now

log = logging.getLogger("relay.delivery.jobs")
# A planning job hands this many of its deliveries to its own worker's senders; the rest become jobs, so
# that a notification to many recipients is spread over the workers.
INLINE_MAX = 8
PRUNE_SHARE = 0.01  # plannings that also drop expired index entries
# A planning job claims up to this many notifications at a time (one while its senders are all busy), and
# claims more while BATCH_SECONDS last: a batch small enough that the other worker takes a share of a
# burst, and RQ's cost of a job (a dozen round trips and more) spread over a second's planning under load.
BATCH = 10
BATCH_SECONDS = 1.5


def plan_batch(event_id: str = "") -> int:
    """The planning job: plan the notifications waiting (`relay.storage.planning`), oldest first and a
    batch at a time, for up to `BATCH_SECONDS`; returns how many were planned. `event_id`: the notification
    whose arrival queued this job (empty for a job queued by a worker), for RQ's listings only.

    Its start clears the pending flag, so the next notification queues another job, which the other
    workers take while this one plans. Events left when the time is up stay unplanned, with a job queued.
    """
    rt = bound()
    planning, owner = rt.intake.planning, rt.name
    deadline = time.monotonic() + BATCH_SECONDS
    claimed, left = planning.claim(owner, _batch(rt), start=True)
    if left:
        rt.intake.request_planning()  # more are waiting: another worker may take a share
    planned = 0
    try:
        while claimed:
            done: list[str] = []
            for ident, _ in claimed:
                if done and time.monotonic() > deadline:
                    break
                try:
                    plan_event(rt, ident)
                    planned += 1
                except RedisError:
                    raise
                except Exception:  # a bug: the event goes back, a few times at most
                    log.exception("planning failed unexpectedly", extra={"eventId": ident})
                    _planning_failed(rt, ident)
                done.append(ident)
            rest = claimed[len(done) :]
            if rest or time.monotonic() > deadline:  # time is up: the rest wait for the next job
                planning.claim(owner, 0, done)
                planning.give_back(owner, rest)
                claimed = []
                if rest or left:
                    rt.intake.request_planning()
                break
            claimed, left = planning.claim(owner, _batch(rt), done)
    finally:
        if claimed:  # a planning that raised: what this job claimed and did not plan goes back
            with contextlib.suppress(RedisError):
                planning.give_back(owner, [c for c in claimed if c[0] in planning.in_hand()])
    return planned


def _batch(rt: Context) -> int:
    """How many notifications to claim: a batch while this worker's senders have threads free, else one
    (a claimed notification waits for room here, where another worker may have room to plan it)."""
    return BATCH if rt.sender.pending < rt.sender.threads else 1


def _planning_failed(rt: Context, event_id: str) -> None:
    _, dropped = rt.intake.planning.give_back(rt.name, [(event_id, now())], failed=True)
    if dropped:
        log.error("notification not planned: its planning failed on every try", extra={"eventId": event_id})


def plan_job(event_id: str) -> int:
    """Plan one notification (a job queued by an earlier relay, or planning again by hand); safe to run
    again after a crash."""
    rt = bound()
    planned = plan_event(rt, event_id)
    rt.redis.zrem(UNPLANNED, event_id)
    return planned


def plan_event(rt: Context, event_id: str) -> int:
    """Turn a stored notification into delivery records and sends; safe to run again after a crash."""
    event = rt.store.event(event_id)
    if event is None:
        log.warning("event expired before it was planned", extra={"eventId": event_id})
        return 0
    notification = Notification.model_validate_json(event.payload)
    records = plan_notification(rt.config, notification, event_id, now())
    _Holds(rt).apply(records)
    here = {r.id for r in [r for r in records if r.state in SENDABLE][:INLINE_MAX]}
    rt.sender.wait_for_room()  # before leasing: a lease is never long without its task in hand
    stored = rt.store.create_deliveries(event_id, records, take=(attempt.lock_ttl(rt), here))
    for record in stored:
        ctx = {"eventId": event_id, "deliveryId": record.id, "channel": record.channel}
        if record.state is State.SKIPPED:
            log.info("delivery skipped: %s", record.lastError, extra=ctx)
        elif record.state is State.HELD and record.notBefore is not None:
            # Also for a record found held (this job runs again after a crash): the same job id, scheduled once.
            rt.intake.deliver_at(record.id, record.notBefore)
            log.info("delivery held by quiet hours until %s", iso(record.notBefore), extra=ctx)
    mine = [r for r in stored if r.held_lease]
    rt.intake.enqueue_deliveries([r.id for r in stored if r.state in SENDABLE and not r.held_lease])
    in_hand = rt.sender.in_hand()  # planned again while this worker still sends them: not twice
    for record in mine:
        if record.id not in in_hand:
            rt.sender.submit(_task(rt, record, notification), record.id)
    if not records:
        log.info("no route for this notification", extra={"eventId": event_id, "kind": notification.kind})
    if random.random() < PRUNE_SHARE:
        rt.store.prune()
    return len(records)


def deliver_job(delivery_id_: str, slot_at: float | None = None) -> str:
    """Lease one delivery to this worker and hand it to the senders.

    `slot_at`: the time of a rate-limit slot the delivery booked; it sends then, without booking again.
    """
    rt = bound()
    rt.sender.wait_for_room()
    rt.store.leases.take([delivery_id_], rt.store.owner)
    rt.sender.submit(_task(rt, delivery_id_, None, slot_at), delivery_id_)
    return "handed to the senders"


def _task(rt: Context, record: Delivery | str, notification: Notification | None, slot_at: float | None = None) -> Any:
    def send() -> None:
        try:
            attempt.run(rt, record, notification, slot_at)
        except Exception as exc:
            ident = record.id if isinstance(record, Delivery) else record
            # A bug, or an outage of Redis: the delivery goes back to the queue, a few times at most.
            log.exception("send failed unexpectedly", extra={"deliveryId": ident})
            if rt.store.leases.lost(ident) >= MAX_LOSSES:
                give_up(rt, ident, f"the delivery crashed or timed out on every try ({type(exc).__name__})")
            else:
                rt.intake.enqueue_deliveries([ident])
            rt.store.leases.release([ident], rt.store.owner)

    return send


def give_up(rt: Context, ident: str, why: str) -> None:
    """Mark a delivery that cannot be sent without crashing as failed (replayable), with the reason."""
    record = rt.store.delivery(ident)
    if record is None or record.state not in OPEN:
        return
    previous = record.state
    record.state = State.FAILED
    record.lastError = why
    items = [i for i in rt.store.deliveries(record.items) if i is not None]  # a digest's follow it
    rt.store.update_many([StateChange(record, previous, labels={"reason": "crash"}), *follow(record, items)])
    log.error("delivery failed: %s", why, extra={"eventId": record.eventId, "deliveryId": ident})


class _Holds:
    """When each route's time intervals let its deliveries go (asked once per route and planning job)."""

    def __init__(self, rt: Context) -> None:
        self.config = rt.config
        self.now = datetime.fromtimestamp(rt.clock(), UTC)
        self.found: dict[str | None, float | None] = {}

    def until(self, route: str | None) -> float | None:
        if route not in self.found:
            until = held_until(self.config, route, self.now)
            self.found[route] = until.timestamp() if until is not None else None
        return self.found[route]

    def apply(self, planned: list[Delivery]) -> None:
        """Each queued delivery that its route's intervals hold now is held until they let it go."""
        for delivery in planned:
            if delivery.state is State.QUEUED:
                delivery.notBefore = self.until(delivery.route)
                if delivery.notBefore is not None:
                    delivery.state = State.HELD


def delivery_job_failed(job: Job, connection: Redis, exc_type: type, exc: BaseException, tb: Any) -> None:
    """RQ's failure callback: once a delivery job crashed or timed out with no RQ retry left, the
    delivery is marked failed with the reason, so it shows up and can be replayed."""
    if job.retries_left:
        return
    # The exception text may hold a URL; its type says enough (the worker's log has the rest).
    why = f"the delivery job crashed or timed out on every try ({exc_type.__name__})"
    give_up(bound(), str(job.args[0]) if job.args else "", why)
