"""The silence stage of the pipeline: at planning and when a delivery comes due, the active silences
(relay.storage.silences) are asked whether one holds or skips it (relay.core.silences.silenced decides).

A held delivery waits, due again when its silence ends (a new silence then may hold it anew); one released
by an operator (`relay release`) goes whatever silences say. Expiring a silence early makes what it held due
at once (`release_held`)."""

from __future__ import annotations

import logging
from collections import Counter
from typing import Protocol

from relay.core.model import Delivery, Notification, State
from relay.core.routing import matcher_view
from relay.core.silences import Silence, Silenced, apply, delivery_view, holder, reads_notification, silenced
from relay.core.states import OPEN
from relay.delivery.context import Context
from relay.delivery.recording import store
from relay.storage.leases import delivery_unit
from relay.storage.silences import Silences
from relay.storage.store import Store, iso

log = logging.getLogger("relay.delivery.silencing")
SILENCED = "relay_silenced_total"


def silence_planned(rt: Context, notification: Notification, planned: list[Delivery]) -> dict[str, str]:
    """Hold or skip the planned deliveries that an active silence matches; their ids -> the action, for
    `count_silenced` once they are stored (a notification planned twice counts once)."""
    now = rt.clock()
    active = Silences(rt.redis).active(now)
    if not active:
        return {}
    fields = matcher_view(notification) if reads_notification(active) else None
    found: dict[str, str] = {}
    for record in planned:
        if record.state not in OPEN:
            continue
        hit = silenced(active, delivery_view(fields, record), now)
        if hit is not None:
            apply(record, hit)
            found[record.id] = hit.silence.action
    return found


def count_silenced(rt: Context, actions: dict[str, str], created: list[Delivery]) -> None:
    for action, count in Counter(actions[r.id] for r in created if r.id in actions).items():
        rt.store.incr(SILENCED, count, action=action)


def silenced_at_due(
    rt: Context, record: Delivery, ctx: dict[str, str], notification: Notification | None = None
) -> bool:
    """A delivery come due (a retry, a held one, one queued): True when an active silence holds it again
    (due anew at the silence's end, stored) or skips it (stored); False: it goes on (and no longer says a
    silence holds it). `notification`: its notification when the caller has it (else read when a silence
    reads its fields)."""
    if record.released or record.items:
        return False  # sent by an operator's word; a digest's items were asked as each was gathered
    now = rt.clock()
    active = Silences(rt.redis).active(now)
    hit = silenced(active, delivery_view(_fields(rt, record, active, notification), record), now) if active else None
    if hit is None:
        if holder(record.lastError) is not None:
            record.lastError = None  # its silence ended: the reason goes with it
        return False
    previous, before = record.state, holder(record.lastError)
    apply(record, hit)
    if before != hit.silence.id or previous is not State.HELD:
        rt.store.incr(SILENCED, action=hit.silence.action)  # newly silenced (not a held one woken early)
    if hit.skip:
        store(rt, record, previous, State.SKIPPED, hit.reason, ctx)
        return True
    assert record.notBefore is not None
    rt.intake.deliver_at(record.id, record.notBefore)  # due then, before the state is stored
    rt.store.update(record, previous)  # lets go of the lease
    log.info("delivery held by a silence until %s: %s", iso(record.notBefore), record.lastError, extra=ctx)
    return True


def _fields(
    rt: Context, record: Delivery, active: list[Silence], notification: Notification | None
) -> dict[str, object] | None:
    if not reads_notification(active):
        return None
    if notification is not None:
        return matcher_view(notification)
    event = rt.store.event(record.eventId)
    return matcher_view(Notification.model_validate_json(event.payload)) if event is not None else None


class Scheduling(Protocol):
    def enqueue_deliveries(self, ids: list[str]) -> None: ...


def release_held(store: Store, silence: Silence, schedule: Scheduling, at: float) -> int:
    """What `silence` held, due now (it expired early at `at`): each asked again when a worker takes it (another
    silence, quiet hours may still hold it). Under a lease: a send a worker has in hand is never undone.
    Returns how many."""
    moved: list[str] = []
    for record in store.deliveries(store.held_ids()):
        if record is None or record.state is not State.HELD or holder(record.lastError) != silence.id:
            continue
        taken, current = store.take_and_read(record.id)
        if not taken or current is None:
            continue
        if current.state is not State.HELD or holder(current.lastError) != silence.id:
            store.leases.release([delivery_unit(current.id)], store.owner)
            continue
        current.notBefore = at
        store.update(current, State.HELD)  # lets go of the lease
        moved.append(current.id)
    # Due now once no lease holds them, so a worker woken at once can take them (were this process to stop
    # first, each still goes at its silence's old end: late, never lost).
    schedule.enqueue_deliveries(moved)
    return len(moved)


__all__ = ["SILENCED", "Silenced", "count_silenced", "release_held", "silence_planned", "silenced_at_due"]
