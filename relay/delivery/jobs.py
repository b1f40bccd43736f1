"""The RQ job (`work`): wake a worker to take the work that is due, plan notifications into deliveries (`plan_event`:
planning only plans) and hand deliveries to this worker's senders. Jobs end fast; the sending happens beside them,
covered by the leases (docs/development.md, "Architecture")."""

from __future__ import annotations

import contextlib
import logging
import random
import time
from typing import Any

from redis.exceptions import RedisError

from relay.core.model import Delivery, Notification
from relay.core.routing import plan_notification
from relay.core.states import OPEN, SENDABLE, State
from relay.delivery import attempt
from relay.delivery.context import Context
from relay.delivery.recording import created, follow, log_context, wake_for
from relay.preferences.sending import note_people
from relay.storage.leases import DELIVERY, EVENT, Claimed, delivery_unit, split_unit
from relay.storage.store import StateChange
from relay.threads import sending as threads

log = logging.getLogger("relay.delivery.jobs")
# A planning hands this many to its own senders; the rest wait due, spread over the workers.
INLINE_MAX = 8
PRUNE_SHARE = 0.01  # plannings that also drop expired index entries
# Units a wake-up takes at a time, more while WORK_SECONDS last: small enough that other workers share a burst,
# while RQ's cost of a job (a dozen round trips) is spread over a second's work.
BATCH = 10
WORK_SECONDS = 1.5


# What a plain `rq worker` taking relay's queue gets: it calls the job without relay's runtime.
NOT_RELAY_WORKER = (
    "relay's wake-up job runs in `relay worker` or `relay serve`, which hand it relay's runtime; a plain"
    " `rq worker` cannot run it (the work stays due in Redis for relay's workers)"
)


def work(rt: Context | str = "", event_id: str = "") -> int:
    """Take due work, oldest first, for up to `WORK_SECONDS`; how many units. Its start clears the wake-up flag, so
    the next notification queues a job the others take meanwhile; work left due keeps a wake-up queued."""
    if isinstance(rt, str):
        raise RuntimeError(NOT_RELAY_WORKER)
    leases, owner = rt.store.leases, rt.name
    deadline = time.monotonic() + WORK_SECONDS
    taken = 0
    claimed, left = leases.claim(owner, _batch(rt), rt.clock(), start=True)
    if left:
        rt.work.request_wake()  # more is due: another worker may take a share
    while claimed:
        for i, unit in enumerate(claimed):
            if i and time.monotonic() > deadline:
                leases.give_back(owner, [c.unit for c in claimed[i:]], rt.clock())  # due still, for the next job
                rt.work.request_wake()
                return taken
            taken += 1
            try:
                _take(rt, unit)
            except BaseException:
                _let_go_of(rt, [c.unit for c in claimed[i + 1 :]])
                raise
        if time.monotonic() > deadline:
            if left:
                rt.work.request_wake()
            return taken
        claimed, left = leases.claim(owner, _batch(rt), rt.clock())
    return taken


def _let_go_of(rt: Context, units: list[str]) -> None:
    """Units taken and not worked on go back due; were Redis away, this worker's own sweep puts them back."""
    with contextlib.suppress(RedisError):  # give_back stops counting them in hand before it calls Redis
        rt.store.leases.give_back(rt.name, units, rt.clock())


def _batch(rt: Context) -> int:
    """How many units to take: as many as this worker's senders have room for, up to BATCH, at least one."""
    return max(1, min(BATCH, 2 * rt.sender.threads - rt.sender.pending))


def _take(rt: Context, unit: Claimed) -> None:
    """Work on one unit this worker leased: plan a notification, or hand a delivery to the senders."""
    if unit.kind == EVENT:
        try:
            plan_event(rt, unit.ident)
        except RedisError:
            raise
        except Exception:  # a bug: the notification goes back, a few times at most
            log.exception("planning failed unexpectedly", extra={"eventId": unit.ident})
            lost(rt, [unit.unit])
        finally:
            rt.store.leases.handed_on([unit.unit])
        return
    rt.sender.wait_for_room()
    rt.sender.submit(_task(rt, unit.ident, None, unit.slot), unit.ident)
    rt.store.leases.handed_on([unit.unit])


WORKER_DIED = "its send was lost on every try: its worker died holding it (see the workers' logs)"


def lost(rt: Context, units: list[str], owner: str | None = None, why: str = WORKER_DIED) -> int:
    """Each goes back due with a loss counted, or is given up (failed, saying `why`); how many went back."""
    back, given_up = rt.store.leases.give_back(owner or rt.name, units, rt.clock(), failed=True)
    for unit in given_up:
        kind, ident = split_unit(unit)
        if kind == DELIVERY:
            give_up(rt, ident, why)
        else:
            log.error("notification not planned: its planning was lost on every try", extra={"eventId": ident})
    if back:
        rt.work.request_wake()
    return back


def plan_event(rt: Context, event_id: str) -> int:
    """Safe to run again after a crash: storing the last of its deliveries drops the lease."""
    rt = rt.pinned()  # one config for the whole planning
    event = rt.store.event(event_id)
    if event is None:
        log.warning("event expired before it was planned", extra={"eventId": event_id})
        rt.store.create_deliveries(event_id, [], done=True)
        return 0
    # Planning plans: the deliveries are stored queued and due now (the gates decide as each comes due).
    with rt.tracer.span("relay.plan", event.trace, **{"relay.event_id": event_id, "relay.kind": event.kind}):
        notification = Notification.model_validate_json(event.payload)
        records = plan_notification(rt.config, notification, event_id, rt.clock())
        rt.tracer.stamp(records)  # their tries continue this trace
        threads.plan(rt, notification, records, event.receivedAt)  # each in its conversation's line, first
        here = {r.id for r in [r for r in records if r.state in SENDABLE][:INLINE_MAX]}
        rt.sender.wait_for_room()  # before leasing: a lease is never long without its task in hand
        stored = rt.store.create_deliveries(event_id, records, take=here, done=True)
        note_people(rt, notification, created(records, stored))  # noted once: as they show
        for record in stored:
            if record.state is State.SKIPPED:
                log.info("delivery skipped: %s", record.lastError, extra=log_context(record))
        wake_for(rt, stored)
        for record in stored:  # leased only when this planning created it: never one a sender holds already
            if record.held_lease:
                rt.sender.submit(_task(rt, record, notification), record.id)
        if not records:
            log.info("no route for this notification", extra={"eventId": event_id, "kind": notification.kind})
        if random.random() < PRUNE_SHARE:
            rt.store.prune()
        return len(records)


def _task(rt: Context, record: Delivery | str, notification: Notification | None, slot_at: float | None = None) -> Any:
    def send() -> None:
        ident = record.id if isinstance(record, Delivery) else record
        try:
            attempt.run(rt, record, notification, slot_at)
        except Exception as exc:
            # A bug, or an outage of Redis: the delivery goes back among the due ones, a few times at most.
            log.exception("send failed unexpectedly", extra={"deliveryId": ident})
            why = f"the delivery crashed or timed out on every try ({type(exc).__name__})"
            with contextlib.suppress(RedisError):  # else its lease stays: the sweep of this worker's own puts it back
                lost(rt, [delivery_unit(ident)], why=why)

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
