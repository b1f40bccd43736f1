"""A channel that is down (docs/delivery.md, "When a channel is down"), in the pipeline: the gate
`relay.delivery.gates.channel_down` holds a delivery to it (`hold`, under its lease); after a send, `after_send`
counts the outcome for the channel, and a transient failure that leaves it down holds the delivery too, its attempt
given back. The channel coming up, or a later wake-up of its own (which probes), wakes it."""

from __future__ import annotations

import logging

from relay.core.model import Delivery, iso
from relay.core.outcome import Outcome
from relay.core.states import State
from relay.delivery.context import Context
from relay.delivery.recording import follow, log_context, note_try
from relay.outages.model import TRANSIENT, down_reason, kind_of
from relay.outages.store import ChannelStates, Gate
from relay.storage.store import StateChange

log = logging.getLogger("relay.delivery.jobs")
SLOT_LEAD = 1.0  # seconds: within the rate gate's sleep (relay.delivery.gates.MAX_SLOT_SLEEP)


def after_send(
    rt: Context, record: Delivery, previous: State, outcome: Outcome, took: float, followers: list[Delivery]
) -> bool:
    """True when a transient failure left the channel down: the record (and `followers`) held and stored."""
    channel = rt.config.channels.get(record.channel)
    outage = channel.outage if channel is not None else None
    clock = rt.clock()  # the minute its send counts in, and the channel's times
    kind = kind_of(outcome)
    # Its scripts are registered by hash: making it sends nothing to Redis.
    gate = ChannelStates(rt.redis).note(
        record.channel,
        kind,
        getattr(outcome, "reason", ""),
        record.id,
        record.createdAt,
        clock,
        took=took,
        after=outage.after if outage is not None else 0,
        probe=outage.probe if outage is not None else None,
        probing=record.probing,
        rated=bool(channel is not None and channel.rate),
    )
    if gate.state == "resumed":
        log.info("channel up again: %d waiting deliveries go out", len(gate.resumed), extra=log_context(record))
        if channel is not None and channel.rate:  # due at their slots only (none due before: none overtakes)
            book_slots(rt, record.channel, channel.rate, gate.resumed)
        rt.work.request_wake()  # they are due now
    if kind != TRANSIENT or gate.state != "down":
        return False
    record.maxAttempts += 1  # a try while the channel is down spends nothing of the delivery's budget
    note_try(record, outcome, took, clock)  # the try that tripped the channel, or a failed probe: in the log too
    hold(rt, record, gate, followers, previous)
    return True


def book_slots(rt: Context, channel: str, rate: float, ids: tuple[str, ...]) -> None:
    """What waited, oldest first, each with the channel's next rate slot booked now: sent in that order. Each is
    due a second before its slot (wake-ups come in whole seconds) and its try waits for the slot itself."""
    now = rt.clock()
    slots = {ident: now + rt.store.reserve_slot(channel, rate) for ident in ids}
    rt.work.schedule({ident: at - SLOT_LEAD for ident, at in slots.items()}, slots)


def hold(rt: Context, record: Delivery, gate: Gate, followers: list[Delivery], previous: State | None = None) -> None:
    before = previous if previous is not None else record.state
    record.state = State.HELD
    record.notBefore = gate.due
    record.lastError = down_reason(gate.since, gate.last_error)
    rt.work.wake_at(gate.due)  # due then (the script made it so) with a wake-up
    rt.store.update_many([StateChange(record, before, labels={"reason": "outage"}), *follow(record, followers)])
    log.info(
        "delivery held: %s (looked at again by %s, or sent as soon as the channel is up)",
        record.lastError,
        iso(gate.due),
        extra={**log_context(record), "state": "held"},
    )
