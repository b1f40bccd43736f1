"""Silences and the deliveries they hold: whether one holds or skips a delivery is the gate
`relay.delivery.gates.silenced_now`'s, when it comes due (relay.core.silences.silenced decides).

A held delivery waits, due again when its silence ends (a new silence then may hold it anew); one released
by an operator (`relay release`) goes whatever silences say. Expiring a silence early makes what it held due
at once (`release_held`)."""

from __future__ import annotations

from typing import Protocol

from relay.core.model import State
from relay.core.silences import Silence, holder
from relay.storage.leases import delivery_unit
from relay.storage.store import Store

SILENCED = "relay_silenced_total"


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


__all__ = ["SILENCED", "Scheduling", "release_held"]
