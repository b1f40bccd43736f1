"""After a config reload, held deliveries are asked again under the new time intervals: the quiet-hours gate
(`relay.delivery.gates.quiet_hours`) says when each may go now.

A held delivery is due at its `notBefore` (`relay.storage.leases`), with an RQ scheduled wake-up then; the
worker that takes it asks the gates again, so a reload that holds a delivery longer needs nothing more.
One that lets it go sooner (an interval widened, or removed from the route) would wait for the old time:
here it is due at the new one, and its record gets the new `notBefore`, under a lease (a send a worker has
in hand is never undone).
"""

from __future__ import annotations

import logging

from relay.core.model import State
from relay.core.outages import held_by_outage
from relay.core.silences import holder
from relay.delivery.context import Context
from relay.delivery.gates import Due, Held, quiet_hours
from relay.storage.leases import delivery_unit

log = logging.getLogger("relay.delivery.holding")
# The workers follow a reload within their heartbeat (5 s): a wake-up moved earlier comes after they have,
# or a worker still on the old intervals would hold the delivery again until the old time.
SETTLE_SECONDS = 10.0


def replan_held(rt: Context) -> int:
    """Each held delivery's `notBefore` under the config now; those that may go sooner get a wake-up then.
    Returns how many were moved sooner."""
    rt = rt.pinned()  # one config throughout
    now = rt.clock()
    ids = rt.store.held_ids()
    sooner = 0
    for record in rt.store.deliveries(ids):
        if record is None or record.state is not State.HELD or record.notBefore is None:
            continue
        if record.digest or record.items:
            continue  # a digest goes at the end of its window, asking the intervals then; its items go in it
        if holder(record.lastError) is not None or held_by_outage(record.lastError):
            continue  # a silence or its channel holds it: due at the silence's end, or when the channel is up
        held = quiet_hours(Due(rt, record, now=now))
        new = max(held.until if isinstance(held, Held) else now, now + SETTLE_SECONDS)
        if abs(new - record.notBefore) < 1:
            continue
        taken, current = rt.store.take_and_read(record.id)
        if not taken or current is None:
            continue  # a worker has it in hand this moment
        if current.state is not State.HELD or current.notBefore is None:
            rt.store.leases.release([delivery_unit(current.id)], rt.store.owner)
            continue
        if new < current.notBefore:
            sooner += 1
        rt.intake.deliver_at(current.id, new)  # due then (sooner or later) before the state is stored
        current.notBefore = new
        rt.store.update(current, State.HELD)  # lets go of the lease
    if sooner:
        log.info("config reloaded: %d held deliveries go out sooner", sooner)
    return sooner
