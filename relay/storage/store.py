"""The records in Redis, read and written. Each change of a delivery's state is one atomic step (record, indexes,
lease, counters, the minute's activity), so that /metrics, the events API and the page agree."""

from __future__ import annotations

import contextlib
import logging
import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from redis import Redis
from redis.exceptions import RedisError

from relay.config import DEAD_WORKER_AFTER
from relay.core.clock import Clock
from relay.core.model import Delivery, State, iso
from relay.digests.store import Digests
from relay.storage.activity import count_activity
from relay.storage.leases import LEASES, LOSSES, READY, Leases, beat_alive, delivery_unit, event_unit
from relay.storage.lists import LISTS, Lists, list_key, list_rest
from relay.storage.records import (
    FAILED,
    HELD,
    LATENCY,
    LATENCY_BUCKETS,
    PREFIX,
    RECEIVED,
    SEND_LATENCY,
    WORKERS,
    EventRecord,
    _text,
    bucket_field,
    delivery_key,
    delivery_to_hash,
    event_key,
    metric_field,
    read_delivery,
    read_event,
    unset_fields,
)
from relay.storage.scripts import CREATE, KEEP_LONGER, RESERVE_SLOT, UPDATE
from relay.storage.tally import Counts, KindLabels, fleet_totals

__all__ = ["FAILED", "HELD", "LATENCY_BUCKETS", "StateChange", "Store", "iso"]  # the names relay.admin reads here
log = logging.getLogger("relay.storage")
# Records a script call stores: about 28,000 arguments, far from the 1,048,576 Redis takes in one command.
PLAN_CHUNK = 500


def _due(record: Delivery, at: float) -> str:
    """When an open record not sent at once is due among the deliveries to send (`-`: it is not open); a held
    one's is its score in the held index too."""
    if record.state is State.HELD:
        return repr(record.notBefore if record.notBefore is not None else at)
    return repr(at) if record.state in (State.QUEUED, State.RETRYING) else "-"


@dataclass
class StateChange:
    record: Delivery
    previous_state: State
    latency_from: float | None = None
    send_seconds: float | None = None
    labels: dict[str, str] = field(default_factory=dict)
    due: float | None = None  # a retry's due time (a held record waits for its notBefore)


class Store:
    def __init__(self, redis: Redis, retention: float, clock: Clock, owner: str = "") -> None:
        self.redis, self.clock = redis, clock  # the clock of every time stored or compared (`relay.core.clock`)
        self.retention = int(retention)
        self.owner = owner  # the worker this process is, as its leases name it
        self.dead_worker_after = DEAD_WORKER_AFTER  # config `dead_worker_after`: how old a live worker's beat may be
        # Where this process counts (relay.storage.tally), and the kinds given a series of their own.
        self.counts = Counts()
        self.kinds = KindLabels(redis)
        self.leases = Leases(redis, self.counts)
        self.digests = Digests(redis, self.retention, self.counts)
        self.lists = Lists(redis)  # the deliveries, newest first (relay.storage.lists)
        self._reserve = redis.register_script(RESERVE_SLOT)
        self._create_script = redis.register_script(CREATE)

    def event(self, event_id: str) -> EventRecord | None:
        return self.events([event_id]).get(event_id)

    def events(self, event_ids: Iterable[str]) -> dict[str, EventRecord]:
        """The events of these ids that are still stored and readable, in one round trip."""
        ids = list(dict.fromkeys(event_ids))
        if not ids:
            return {}
        pipe = self.redis.pipeline(transaction=False)
        for i in ids:
            pipe.hgetall(event_key(i))
        found = (read_event(data, i) for i, data in zip(ids, pipe.execute(raise_on_error=False), strict=True))
        return {record.eventId: record for record in found if record is not None}

    def event_delivery_ids(self, event_id: str) -> list[str]:
        """The ids of the event's deliveries in the order they were stored (none of an event that cannot be read)."""
        event = self.event(event_id)
        return event.deliveries if event is not None else []

    def create_deliveries(
        self, event_id: str, records: list[Delivery], take: set[str] | None = None, done: bool = False
    ) -> list[Delivery]:
        """Store records that do not exist yet; the stored state of every record. This worker leases those in `take`
        it creates, the others open are made due, and `done` drops its lease on the notification with the last
        chunk: a planning stopped part way is planned again whole, and finds what it stored (never made twice)."""
        stored: list[Delivery] = []
        try:
            event = event_key(event_id)  # where the chunks add their ids
            for start in range(0, max(1, len(records)), PLAN_CHUNK):
                last = start + PLAN_CHUNK >= len(records)
                chunk = records[start : start + PLAN_CHUNK]
                stored += self._create(event_id, event, chunk, take or set(), done and last)
        except RedisError:
            taken = [delivery_unit(r.id) for r in stored if r.held_lease]
            with contextlib.suppress(RedisError):  # else this worker's sweep of its own leases does it
                self.leases.give_back(self.owner, taken, self.clock())
            raise
        return stored

    def _create(
        self, event_id: str, event: str, records: list[Delivery], to_take: set[str], done: bool
    ) -> list[Delivery]:
        keys = [event, LISTS, FAILED, self.counts.key, LEASES, HELD, READY, LOSSES]
        args: list[Any] = [self.retention, self.owner, event_unit(event_id) if done else ""]
        at = self.clock()
        for record in records:
            keys.append(delivery_key(record.id))
            fields = delivery_to_hash(record)
            labels = {"state": record.state, "channel": record.channel, "kind": self.kinds.label(record.kind)}
            metric = metric_field("relay_deliveries_total", **labels)
            failed = int(record.state is State.FAILED)
            args += [record.id, repr(record.createdAt), failed, int(record.id in to_take)]
            args += [metric, _due(record, at) if record.state is State.HELD else "-", _due(record, at)]
            args += [list_key(record.state, record.channel, record.kind), len(fields)]
            for pair in fields.items():
                args.extend(pair)
        outcome = [int(v) for v in self._create_script(keys=keys, args=args)]
        for record, made in zip(records, outcome, strict=True):
            record.held_lease = made >= 2
        if all(made % 2 for made in outcome):
            return records  # all new: they are stored exactly as given
        existing = iter(self.deliveries([r.id for r, made in zip(records, outcome, strict=True) if not made % 2]))
        stored: list[Delivery] = []
        for record, made in zip(records, outcome, strict=True):
            current = record if made % 2 else next(existing)
            if current is not None:  # an existing record may have expired since
                current.held_lease = record.held_lease
                stored.append(current)
            elif record.held_lease:
                self.leases.release([delivery_unit(record.id)], self.owner)
        return stored

    def delivery(self, delivery_id_: str) -> Delivery | None:
        return self.deliveries([delivery_id_])[0]

    def deliveries(self, ids: Iterable[str]) -> list[Delivery | None]:
        """None for each not stored or unreadable (logged: one bad record takes no listing down)."""
        ids = list(ids)
        if not ids:  # a record that is no digest asks for its items: no round trip
            return []
        pipe = self.redis.pipeline(transaction=False)
        for i in ids:
            pipe.hgetall(delivery_key(i))
        return [read_delivery(data, i) for i, data in zip(ids, pipe.execute(raise_on_error=False), strict=True)]

    def update(self, record: Delivery, previous_state: State) -> None:
        """Store the record in one round trip; a lease this worker held is let go (`update_many`: with latencies)."""
        self.update_many([StateChange(record, previous_state)])

    def update_many(self, outcomes: list[StateChange]) -> None:
        pipe = self.redis.pipeline(transaction=True)
        args: list[Any] = [self.owner, len(outcomes)]
        counted: list[tuple[str, float]] = []
        reached: Counter[str] = Counter()  # each state reached, counted in its minute (relay.storage.activity)
        at = self.clock()
        for outcome in outcomes:
            record, previous_state = outcome.record, outcome.previous_state
            record.updatedAt = at
            key, fields = delivery_key(record.id), delivery_to_hash(record)
            pipe.hset(key, mapping=fields)  # type: ignore[arg-type]
            if dropped := unset_fields(fields):
                pipe.hdel(key, *dropped)
            waits = record.notBefore if record.state is State.HELD else outcome.due  # a wait's end, if it waits
            pipe.expire(key, keep := self.retention + max(0, math.ceil((waits or at) - at)))  # never gone while waiting
            if keep > self.retention:  # its notification (event record, payload) is kept as long
                pipe.eval(KEEP_LONGER, 1, event_key(record.eventId), keep)
            if record.state is State.FAILED:
                pipe.zadd(FAILED, {record.id: at})
            elif previous_state is State.FAILED:
                pipe.zrem(FAILED, record.id)
            if record.state is State.HELD:
                pipe.zadd(HELD, {record.id: _due(record, at)})
            elif previous_state is State.HELD:
                pipe.zrem(HELD, record.id)
            if record.state != previous_state:
                reached[record.state.value] += 1
                kind = self.kinds.label(record.kind)
                labels = {"state": record.state, "channel": record.channel, "kind": kind, **outcome.labels}
                counted.append((metric_field("relay_deliveries_total", **labels), 1))
            if outcome.latency_from is not None:
                self._observe(counted, LATENCY, max(0.0, record.updatedAt - outcome.latency_from))
            if outcome.send_seconds is not None:
                self._observe(counted, SEND_LATENCY, outcome.send_seconds, channel=record.channel)
            args += [record.id, repr(record.createdAt), record.state.value, list_rest(record.channel, record.kind)]
            args.append(int(record.held_lease))
        if outcomes:
            count_activity(pipe, reached, at)
            for name, amount in counted:
                args += [name, repr(amount)]
            # Its text, not its sha: no NOSCRIPT inside EXEC.
            pipe.eval(UPDATE, 3, LEASES, LOSSES, self.counts.key, *args)
            pipe.execute()
        for outcome in outcomes:
            outcome.record.held_lease = False

    def reserve_slot(self, channel: str, rate: float) -> float:
        """Book the channel's next send slot (at most `rate` a second); seconds until it comes."""
        return float(self._reserve(keys=[f"{PREFIX}rate:{channel}"], args=[1.0 / rate, repr(self.clock())]))

    def take_and_read(self, delivery_id_: str) -> tuple[bool, Delivery | None]:
        """Lease and read the delivery unless a worker holds it (what a worker has in hand is left to it)."""
        taken, fields = self.leases.take_and_read(delivery_id_, self.owner, delivery_key(delivery_id_))
        if not taken:
            return False, None
        record = read_delivery(fields, delivery_id_)
        if record is None:
            self.leases.release([delivery_unit(delivery_id_)], self.owner)
            return True, None
        record.held_lease = True
        return True, record

    def held_ids(self) -> list[str]:
        return [_text(v) for v in self.redis.zrange(HELD, 0, -1)]

    def prune(self) -> None:
        cutoff = self.clock() - self.retention
        pipe = self.redis.pipeline(transaction=False)
        for index in (FAILED, HELD):  # held: by notBefore, long past for any still listed
            pipe.zremrangebyscore(index, "-inf", cutoff)
        pipe.xtrim(RECEIVED, minid=math.ceil(cutoff * 1000), approximate=False)  # exact; its IDs are ms
        pipe.execute()
        self.lists.prune(cutoff)

    def incr(self, name: str, amount: int = 1, **labels: str) -> None:
        if "kind" in labels:
            labels["kind"] = self.kinds.label(labels["kind"])
        self.redis.hincrby(self.counts.key, metric_field(name, **labels), amount)

    @staticmethod
    def _observe(counted: list[tuple[str, float]], name: str, seconds: float, **labels: str) -> None:
        """Only its own bucket is counted (not one per bucket): /metrics adds them up into cumulative ones."""
        counted.append((bucket_field(name, seconds, **labels), 1))
        counted.append((metric_field(name + "_count", **labels), 1))
        counted.append((metric_field(name + "_sum", **labels), seconds))

    def counters(self) -> dict[str, float]:
        return fleet_totals(self.redis)

    def heartbeat(self, worker: str) -> None:
        self.redis.zadd(WORKERS, {worker: self.clock()})

    def forget_worker(self, worker: str) -> None:
        self.redis.zrem(WORKERS, worker)

    def worker_beats(self) -> dict[str, float]:
        pairs: list[tuple[Any, Any]] = self.redis.zrange(WORKERS, 0, -1, withscores=True)  # type: ignore[assignment]
        return {_text(k): float(v) for k, v in pairs}

    def live_workers(self) -> list[str]:
        """The workers alive now (`beat_alive`, at `dead_worker_after`); beats an hour old are dropped."""
        at = self.clock()
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(WORKERS, "-inf", at - max(3600.0, self.dead_worker_after))
        pipe.zrange(WORKERS, 0, -1, withscores=True)
        return [_text(k) for k, v in pipe.execute()[1] if beat_alive(float(v), at, self.dead_worker_after)]
