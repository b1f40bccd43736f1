"""Held deliveries made due sooner when what held them lets go early (docs/development.md, "Architecture"): after a
config reload, each asks the quiet-hours gate again (`replan_held`; one held longer needs nothing: the gates are
asked again at its wake-up), each under its lease with its new `notBefore` (`move_held`). What a silence expired
early held is due at once through the silence's index (`relay.admin.silences.expire`)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

from relay.core.model import Delivery, State
from relay.delivery.context import Context
from relay.delivery.gates import Due, Held, quiet_hours
from relay.outages.model import held_by_outage
from relay.silences.model import holder
from relay.storage.leases import delivery_unit
from relay.storage.requeue import taken
from relay.storage.store import Store

log = logging.getLogger("relay.delivery.holding")
# The workers follow a reload within their heartbeat (5 s): a wake-up moved earlier comes after they have,
# or a worker still on the old intervals would hold the delivery again until the old time.
SETTLE_SECONDS = 10.0


def replan_held(rt: Context) -> int:
    """Those held deliveries that may go sooner under the config now get a wake-up then; how many."""
    rt = rt.pinned()  # one config throughout
    now = rt.clock()

    def when(record: Delivery) -> float | None:
        if record.digest or record.items or record.notBefore is None:
            return None  # a digest goes at the end of its window, asking the intervals then; its items go in it
        if holder(record.lastError) is not None or held_by_outage(record.lastError):
            return None  # a silence or its channel holds it: due at the silence's end, or when the channel is up
        held = quiet_hours(Due(rt, record, now=now))
        new = max(held.until if isinstance(held, Held) else now, now + SETTLE_SECONDS)
        return new if abs(new - record.notBefore) >= 1 else None

    moved = move_held(rt.store, when)
    rt.work.schedule({ident: new for ident, _, new in moved})
    sooner = sum(1 for _, old, new in moved if new < old)
    if sooner:
        log.info("config reloaded: %d held deliveries go out sooner", sooner)
    return sooner


class Scheduling(Protocol):
    def enqueue_deliveries(self, ids: list[str]) -> None: ...


def move_held(store: Store, when: Callable[[Delivery], float | None]) -> list[tuple[str, float, float]]:
    """Under a lease (a send in hand is never undone): (id, old notBefore, new) of each moved; the caller makes
    them due once no lease holds them (were it to stop first, each goes at its old time: never lost)."""
    moved = []
    held = [r for r in store.deliveries(store.held_ids()) if r is not None and r.state is State.HELD]
    for current in taken(store, [r for r in held if when(r) is not None], State.HELD):
        new = when(current)
        if new is None:
            store.leases.release([delivery_unit(current.id)], store.owner)
            continue
        moved.append((current.id, current.notBefore or new, new))
        current.notBefore = new
        store.update(current, State.HELD)  # lets go of the lease
    return moved
