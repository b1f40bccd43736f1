"""After a config reload, held deliveries are asked again under the new time intervals (relay.core.quiet).

A held delivery waits as an RQ scheduled job at its `notBefore`; that job asks the intervals again when it
runs, so a reload that holds a delivery longer needs nothing more. One that lets it go sooner (an interval
widened, or removed from the route) would wait for the old time: here it gets a wake-up at the new one,
and its record the new `notBefore`, under its send lock (a send in hand is never undone).
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime

from relay.core.model import State
from relay.core.quiet import held_until
from relay.delivery.context import Context
from relay.storage.queue import RELEASE_LOCK_TTL

log = logging.getLogger("relay.delivery.holding")
# The workers follow a reload within their heartbeat (5 s): a wake-up moved earlier comes after they have,
# or a worker still on the old intervals would hold the delivery again until the old time.
SETTLE_SECONDS = 10.0


def replan_held(rt: Context) -> int:
    """Each held delivery's `notBefore` under the config now; those that may go sooner get a wake-up then.
    Returns how many were moved sooner."""
    now = rt.clock()
    at = datetime.fromtimestamp(now, UTC)
    ids = rt.store.held_ids()
    sooner = 0
    for record in rt.store.deliveries(ids):
        if record is None or record.state is not State.HELD or record.notBefore is None:
            continue
        if record.digest or record.items:
            continue  # a digest goes at the end of its window, asking the intervals then; its items go in it
        until = held_until(rt.config, record.route, at)
        new = max(until.timestamp() if until is not None else now, now + SETTLE_SECONDS)
        if abs(new - record.notBefore) < 1:
            continue
        taken, current = rt.store.lock_and_read(record.id, RELEASE_LOCK_TTL)
        if not taken:
            continue  # a worker has it in hand this moment
        if current is None or current.state is not State.HELD or current.notBefore is None:
            rt.store.unlock(record.id)
            continue
        if new < current.notBefore:
            rt.intake.deliver_at(current.id, new, again=True)  # scheduled before the state is stored
            sooner += 1
        current.notBefore = new
        rt.store.update(current, State.HELD)  # lets go of the lock
    if sooner:
        log.info("config reloaded: %d held deliveries go out sooner", sooner)
    return sooner
