"""The gates a delivery passes when it comes due, asked in order by one function (`through`): the one place a
hold or a skip is decided (docs/development.md, "Architecture"; Alertmanager's notify pipeline is the model).
Each gate returns None (it passes) or a verdict that `through` carries out; the first wins, and a delivery held
is asked the whole list again when it comes due. The order, and why:

1. `in_digest`: an item gathered into a digest waits in it (the digest sends it).
2. `opted_out`: the person's opt-outs skip it (a skip ends it at once, never after a hold).
3. `silenced_now`: an active silence holds or skips it (its record says which silence).
4. `quiet_hours`: the route's time intervals and the person's active hours hold it, found together.
5. `channel_down`: its channel is down and this is not the probe: it waits for the channel.
6. `in_order`: a threaded message waits while an earlier one of its conversation is sent or retried
   (relay.threads). After every hold, so that a held message (out of the way) never holds the others back, nor
   asks its turn while held; before the rate, so that a message waiting its turn spends no slot.
7. `rate`: the channel's rate limit books it a send slot, last so that nothing held spends one.

A delivery released by an operator (`released`) passes 1-4, never a down channel, its turn or the rate. At-least-once:
a new state's due time is made due before the state is stored, and storing it lets go of the lease.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property, partial

from relay.core.model import Delivery, Notification, State, iso
from relay.core.quiet import held_until
from relay.core.routing import matcher_view
from relay.delivery.context import Context
from relay.delivery.recording import log_context, store
from relay.outages import sending as outages
from relay.outages.model import held_by_outage
from relay.outages.store import ChannelStates
from relay.outages.store import Gate as ChannelGate
from relay.preferences.model import Preference, active_until, claim_of_delivery, opted_out_why, personal
from relay.preferences.store import Preferences
from relay.silences.model import delivery_view, holder, silenced
from relay.silences.store import Silences
from relay.storage.store import StateChange
from relay.threads import sending as threads
from relay.threads.model import Conversation
from relay.threads.store import Waits

log = logging.getLogger("relay.delivery.jobs")
SLOT_SLACK = 0.05  # seconds: a slot this close is taken at once
MAX_SLOT_SLEEP = 1.5
PERSON_HOURS = "held by the person's active hours"
SILENCED = "relay_silenced_total"
SKIPS = "relay_preference_skips_total"


@dataclass
class Due:
    """A delivery come due, as the gates see it: notification and preferences read when a gate first asks."""

    rt: Context
    record: Delivery
    slot_at: float | None = None  # the rate slot it booked, when it comes due at one
    given: Notification | None = None  # its notification, when the caller has it (a planning's)
    now: float = 0.0
    conversation: Conversation | None = None  # a threaded one's, as it is when its turn comes

    def __post_init__(self) -> None:
        self.now = self.now or self.rt.clock()

    @cached_property
    def notification(self) -> Notification | None:
        event = self.rt.store.event(self.record.eventId) if self.given is None else None
        return Notification.model_validate_json(event.payload) if event is not None else self.given

    @cached_property
    def preferences(self) -> list[Preference]:
        """Its people's preferences: none for a delivery to no one person (no read)."""
        notification = self.notification if personal(self.rt.config, self.record) else None
        people = claim_of_delivery(self.rt.config, notification, self.record).people() if notification else []
        return list(Preferences(self.rt.redis).get_many(people).values())


@dataclass(frozen=True)
class Held:
    until: float
    why: str | None  # the record's `lastError` while held (None: the route's quiet hours)
    counted: tuple[str, dict[str, str]] | None = None  # a counter to add once it is stored


@dataclass(frozen=True)
class Skipped:
    why: str
    counted: tuple[str, dict[str, str]] | None = None


@dataclass(frozen=True)
class WaitsForChannel:
    gate: ChannelGate


@dataclass(frozen=True)
class Throttled:
    wait: float


@dataclass(frozen=True)
class Gathered:
    """Nothing to do: the item waits in its digest, which sends it."""


Verdict = Held | Skipped | WaitsForChannel | Throttled | Gathered | Waits
Gate = Callable[[Due], Verdict | None]


def in_digest(due: Due) -> Verdict | None:
    return Gathered() if due.record.digest else None


def opted_out(due: Due) -> Verdict | None:
    record = due.record
    if record.released or record.items:
        return None
    why = opted_out_why(due.rt.config, due.preferences, record.kind, record.channel)
    return Skipped(why, (SKIPS, {"kind": record.kind, "channel": record.channel})) if why is not None else None


def silenced_now(due: Due) -> Verdict | None:
    """An active silence that matches: a skip, or a hold until it ends (counted when newly silenced). What a
    silence holds is indexed by it, and leaves its index when asked again (`relay.silences.store`)."""
    record = due.record
    silences = Silences(due.rt.redis)
    was = holder(record.lastError)
    hit = None
    if not (record.released or record.items):  # a digest's items were asked as each was gathered
        found = silences.candidates(due.now)
        notification = due.notification if found and found.reads_notification else None
        fields = matcher_view(notification) if notification is not None else None
        hit = silenced(found, delivery_view(fields, record), due.now) if found else None
    if was is not None and (hit is None or hit.silence.id != was):
        silences.lets_go(was, record.id)
    if hit is None:
        if was is not None:
            record.lastError = None  # its silence ended: the reason goes with it
        return None
    fresh = was != hit.silence.id or record.state is not State.HELD
    counted = (SILENCED, {"action": str(hit.silence.action)}) if fresh else None  # not a held one woken early
    if hit.skip:
        return Skipped(hit.reason, counted)
    silences.holds(hit.silence.id, hit.until, record.id, due.now)
    return Held(hit.until, hit.reason, counted)


def quiet_hours(due: Due) -> Verdict | None:
    """The route's time intervals and the person's active hours, together: held until both let it go."""
    record, config = due.record, due.rt.config
    if record.released:
        return None
    mine = active_until(config, due.preferences, record.kind, due.now, partial(held_until, config, record.route))
    if mine is not None:
        return Held(mine, PERSON_HOURS)
    route = held_until(config, record.route, datetime.fromtimestamp(due.now, UTC))
    return Held(route.timestamp(), None) if route is not None else None


def channel_down(due: Due) -> Verdict | None:
    """Its channel is down and no probe is due: it waits. One that goes marks whether it is the probe."""
    record, rt = due.record, due.rt
    channel = rt.config.channels.get(record.channel)
    if channel is None or channel.outage is None:
        return None
    gate = ChannelStates(rt.redis).gate(record.channel, record.id, record.createdAt, channel.outage.probe, due.now)
    if gate.state == "down":
        return WaitsForChannel(gate)
    record.probing = gate.state == "probe"
    if record.state is State.HELD and held_by_outage(record.lastError):
        record.notBefore = None  # its wait for the channel was lateness, counted as such when delivered
    if record.probing:
        log.info("channel down: this delivery probes it", extra=log_context(record))
    return None


def in_order(due: Due) -> Verdict | None:
    """A threaded message's turn in its conversation (none asked of an unthreaded one: no round trip)."""
    turn = threads.in_order(due.rt, due.record, due.now)
    if isinstance(turn, Waits):
        return turn
    due.conversation = turn
    return None


def rate(due: Due) -> Verdict | None:
    """A rate-limited channel: book the next slot; one that is not near waits for it, due then."""
    channel = due.rt.config.channels.get(due.record.channel)
    if channel is not None and channel.rate and due.slot_at is None:
        wait = due.rt.store.reserve_slot(due.record.channel, channel.rate)
        if wait > SLOT_SLACK:
            return Throttled(wait)
    left = due.slot_at - due.rt.clock() if due.slot_at is not None else 0.0
    if 0 < left <= MAX_SLOT_SLEEP:
        time.sleep(left)  # RQ schedules in whole seconds: a wake-up may come up to a second before its slot
    return None


GATES: tuple[Gate, ...] = (in_digest, opted_out, silenced_now, quiet_hours, channel_down, in_order, rate)


def through(due: Due) -> str | None:
    """The state the first verdict leaves; None: it passed every gate, to be sent now."""
    for gate in GATES:
        verdict = gate(due)
        if verdict is not None:
            return _carry_out(due, verdict)
    return None


def _carry_out(due: Due, verdict: Verdict) -> str:
    rt, record = due.rt, due.record
    previous, ctx = record.state, log_context(record)
    if isinstance(verdict, Gathered):
        return record.state
    if isinstance(verdict, Throttled):
        rt.work.retry_later(record.id, verdict.wait, slot_at=rt.clock() + verdict.wait)
        return "throttled"
    if isinstance(verdict, Waits):  # due again then (its turn's script made it so), or woken sooner
        rt.work.wake_at(verdict.until)
        log.info("waits its turn in its conversation behind %s", verdict.for_, extra=ctx)
        if record.state is State.HELD:  # its hold is over: queued, it holds the later ones of its conversation back
            record.state, record.notBefore, record.lastError = State.QUEUED, None, None
            rt.store.update_many([StateChange(record, previous)])
        return "waiting"
    # A digest's items wait with it (and are kept as long: never removed while waiting).
    items = [i for i in rt.store.deliveries(record.items) if i is not None and i.state is State.HELD]
    if isinstance(verdict, WaitsForChannel):
        outages.hold(rt, record, verdict.gate, items)
        return record.state
    if isinstance(verdict, Skipped):
        state = store(rt, record, previous, State.SKIPPED, verdict.why, ctx)
    else:
        record.state, record.notBefore, record.lastError = State.HELD, verdict.until, verdict.why
        rt.work.deliver_at(record.id, verdict.until)  # due then, before the state is stored
        for item in items:
            item.notBefore = verdict.until
        rt.store.update_many([StateChange(record, previous), *(StateChange(i, State.HELD) for i in items)])
        log.info("delivery held until %s: %s", iso(verdict.until), verdict.why or "quiet hours", extra=ctx)
        state = record.state
    if verdict.counted is not None:
        rt.store.incr(verdict.counted[0], 1, **verdict.counted[1])
    return state
