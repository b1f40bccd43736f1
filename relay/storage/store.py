"""Event and delivery records in Redis: what was received, what was sent, what failed and why."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from redis import Redis

from relay.core.model import State

PREFIX = "relay:"
EVENTS = PREFIX + "events"  # zset eventId -> received time
DELIVERIES = PREFIX + "deliveries"  # zset delivery id -> created time
FAILED = PREFIX + "failed"  # zset delivery id -> time it failed
METRICS = PREFIX + "metrics"  # hash of counters, shared by API and workers
WORKERS = PREFIX + "workers"  # zset worker name -> last heartbeat
SCAN_LIMIT = 20_000
LATENCY = "relay_delivery_latency_seconds"  # accepted -> delivered
SEND_LATENCY = "relay_send_duration_seconds"  # one send through Apprise, by channel
LATENCY_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0, 3600.0,
)  # fmt: skip  # most index entries one listing reads


# Slots of a channel's rate limit: each call books the next free one (a virtual schedule, GCRA-like),
# so a burst is spread over time in one round trip each, without waking everyone at once.
_RESERVE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0')
if nxt < now then nxt = now end
redis.call('SET', KEYS[1], tostring(nxt + interval), 'PX', math.ceil((nxt + interval - now) * 1000) + 1000)
return tostring(nxt - now)
"""

# Store deliveries' new states atomically in one command: each record, the failed index, the send lock's
# release and the metrics (a MULTI pipeline would be eleven commands and twenty replies per record).
# KEYS: failed index, metrics, then per record its key and its lock's key. ARGV: retention, then per
# record: id, updatedAt, failed-index op (add/rem/-), release lock (1/0), n, n field/value pairs, the
# counts of integer and of float increments, then those increments (field, amount).
_UPDATE = """
local i = 2
for r = 1, (#KEYS - 2) / 2 do
  local key, lock = KEYS[2 * r + 1], KEYS[2 * r + 2]
  local id, updated, failed, unlock, n = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], tonumber(ARGV[i + 4])
  redis.call('HSET', key, unpack(ARGV, i + 5, i + 4 + 2 * n))
  redis.call('EXPIRE', key, ARGV[1])
  if unlock == '1' then redis.call('DEL', lock) end
  if failed == 'add' then
    redis.call('ZADD', KEYS[1], updated, id)
  elseif failed == 'rem' then
    redis.call('ZREM', KEYS[1], id)
  end
  i = i + 5 + 2 * n
  local ints, floats = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, ints do
    redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  for _ = 1, floats do
    redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
end
return 1
"""

# Create delivery records that do not exist yet, atomically, and take the send lock of those the caller
# will send at once: one round trip for a whole notification. Returns per record 0 (it existed: read
# it), 1 (created) or 2 (created, lock taken).
# KEYS: event's delivery list, deliveries index, failed index, metrics, then per record its key and
# its lock's key. ARGV: retention, lock owner, lock ttl, then per record: id, createdAt, failed (1/0),
# lock (1/0), its metric field, n, n field/value pairs.
_CREATE = """
local out = {}
local a = 4
for r = 1, (#KEYS - 4) / 2 do
  local key, lock = KEYS[3 + 2 * r], KEYS[4 + 2 * r]
  local id, created, failed, take, metric = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local n = tonumber(ARGV[a + 5])
  if redis.call('EXISTS', key) == 1 then
    out[r] = 0
  else
    redis.call('HSET', key, unpack(ARGV, a + 6, a + 5 + 2 * n))
    redis.call('EXPIRE', key, ARGV[1])
    redis.call('ZADD', KEYS[2], created, id)
    redis.call('RPUSH', KEYS[1], id)
    redis.call('HINCRBY', KEYS[4], metric, 1)
    if failed == '1' then redis.call('ZADD', KEYS[3], created, id) end
    out[r] = 1
    if take == '1' and redis.call('SET', lock, ARGV[2], 'NX', 'EX', ARGV[3]) then out[r] = 2 end
  end
  a = a + 6 + 2 * n
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return out
"""

# Take a delivery's send lock and read the record, in one round trip: {1, fields} or {0}.
_LOCK_AND_READ = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return {1, redis.call('HGETALL', KEYS[2])}
end
return {0}
"""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def now() -> float:
    return time.time()


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int(ts * 1000) % 1000:03d}Z"


def event_key(event_id: str) -> str:
    return f"{PREFIX}event:{event_id}"


def event_deliveries_key(event_id: str) -> str:
    return f"{PREFIX}event:{event_id}:deliveries"


def dedup_key(event_id: str) -> str:
    return f"{PREFIX}dedup:{event_id}"


def delivery_key(delivery_id: str) -> str:
    return f"{PREFIX}delivery:{delivery_id}"


def lock_key(delivery_id: str) -> str:
    return f"{PREFIX}lock:{delivery_id}"


def delivery_id(event_id: str, message_index: int, channel: str, recipient_index: int | None) -> str:
    """Stable: planning the same event twice yields the same ids, so nothing is created twice."""
    raw = f"{event_id}\x00{message_index}\x00{channel}\x00{'' if recipient_index is None else recipient_index}"
    return "d" + hashlib.sha256(raw.encode()).hexdigest()[:24]


def _label_value(value: str) -> str:
    # Values come from payloads (kinds): keep them short and free of the field's separators.
    clean = "".join(c if c not in "|,=\n" else "_" for c in value)
    return clean[:100]


def metric_field(name: str, **labels: str) -> str:
    if not labels:
        return name
    return _field(name, tuple(sorted(labels.items())))


@lru_cache(maxsize=4096)
def _field(name: str, labels: tuple[tuple[str, str], ...]) -> str:
    # Made for every delivery stored, from a handful of distinct label sets: made once each.
    return name + "|" + ",".join(f"{k}={_label_value(v)}" for k, v in labels)


@dataclass
class DeliveryRecord:
    id: str
    eventId: str
    kind: str
    messageIndex: int
    recipientType: str | None
    recipient: str | None
    address: str | None
    channel: str
    template: str
    state: str
    attempts: int
    maxAttempts: int
    lastError: str | None
    createdAt: float
    updatedAt: float
    fallback: list[str]
    attemptTimes: list[float]
    fallbackFor: str | None = None
    recipientIndex: int | None = None
    # The route that planned it (a name, `routes[i]` or `default`); None in records made before routes had one.
    route: str | None = None
    # This worker holds the record's send lock: the update that stores the outcome releases it.
    held_lock: bool = field(default=False, init=False, compare=False, repr=False)

    @classmethod
    def from_hash(cls, data: dict[str, str]) -> DeliveryRecord:
        return cls(
            id=data["id"],
            eventId=data["eventId"],
            kind=data.get("kind", ""),
            messageIndex=int(data.get("messageIndex", 0)),
            recipientType=data.get("recipientType") or None,
            recipient=data.get("recipient") or None,
            address=data.get("address") or None,
            channel=data.get("channel", ""),
            template=data.get("template", "auto"),
            state=data.get("state", State.QUEUED.value),
            attempts=int(data.get("attempts", 0)),
            maxAttempts=int(data.get("maxAttempts", 1)),
            lastError=data.get("lastError") or None,
            createdAt=float(data.get("createdAt", 0)),
            updatedAt=float(data.get("updatedAt", 0)),
            fallback=json.loads(data.get("fallback", "[]")),
            attemptTimes=json.loads(data.get("attemptTimes", "[]")),
            fallbackFor=data.get("fallbackFor") or None,
            recipientIndex=int(data["recipientIndex"]) if data.get("recipientIndex") else None,
            route=data.get("route") or None,
        )

    def to_hash(self) -> dict[str, str]:
        return {
            "id": self.id,
            "eventId": self.eventId,
            "kind": self.kind,
            "messageIndex": str(self.messageIndex),
            "recipientType": self.recipientType or "",
            "recipient": self.recipient or "",
            "address": self.address or "",
            "channel": self.channel,
            "template": self.template,
            "state": self.state,
            "attempts": str(self.attempts),
            "maxAttempts": str(self.maxAttempts),
            "lastError": self.lastError or "",
            "createdAt": repr(self.createdAt),
            "updatedAt": repr(self.updatedAt),
            "fallback": json.dumps(self.fallback),
            "attemptTimes": json.dumps(self.attemptTimes),
            "fallbackFor": self.fallbackFor or "",
            "recipientIndex": "" if self.recipientIndex is None else str(self.recipientIndex),
            "route": self.route or "",
        }

    def public(self, with_event: bool = False) -> dict[str, Any]:
        """The delivery as the API shows it (SPEC's shape, plus a few extra fields)."""
        out: dict[str, Any] = {
            "id": self.id,
            "recipientType": self.recipientType,
            "recipient": self.recipient,
            "channel": self.channel,
            "route": self.route,
            "state": self.state,
            "attempts": self.attempts,
            "lastError": self.lastError,
            "createdAt": iso(self.createdAt),
            "updatedAt": iso(self.updatedAt),
            "address": self.address,
            "template": self.template,
            "attemptTimes": [iso(t) for t in self.attemptTimes],
        }
        if self.fallbackFor:
            out["fallbackFor"] = self.fallbackFor
        if with_event:
            out["eventId"] = self.eventId
            out["kind"] = self.kind
        return out


@dataclass
class EventRecord:
    eventId: str
    kind: str
    receivedAt: float
    payload: str


def hash_pairs(flat: Any) -> dict[Any, Any]:
    """A hash as a Lua script returns HGETALL's reply (field, value, field, value, ...); nothing: {}."""
    items = flat if isinstance(flat, list) else []
    return dict(zip(items[::2], items[1::2], strict=True))


def event_from_hash(data: Any) -> EventRecord | None:
    """The event stored in a hash read with HGETALL (None when there was none)."""
    if not data:
        return None
    d = {_text(k): _text(v) for k, v in data.items()}
    return EventRecord(d["eventId"], d.get("kind", ""), float(d.get("receivedAt", 0)), d.get("payload", "{}"))


@dataclass
class Outcome:
    """A delivery's new state, to be stored (`Store.update_many`)."""

    record: DeliveryRecord
    previous_state: str
    latency_from: float | None = None
    send_seconds: float | None = None
    labels: dict[str, str] = field(default_factory=dict)


class Store:
    def __init__(self, redis: Redis, retention: float) -> None:
        self.redis = redis
        self.retention = int(retention)
        self._reserve = redis.register_script(_RESERVE_SLOT)
        self._lock_and_read = redis.register_script(_LOCK_AND_READ)
        self._update = redis.register_script(_UPDATE)
        self._create = redis.register_script(_CREATE)

    # -- events ---------------------------------------------------------------------------------

    def event(self, event_id: str) -> EventRecord | None:
        return event_from_hash(self.redis.hgetall(event_key(event_id)))

    def event_delivery_ids(self, event_id: str) -> list[str]:
        return [_text(v) for v in self.redis.lrange(event_deliveries_key(event_id), 0, -1)]

    # -- deliveries -----------------------------------------------------------------------------

    def create_deliveries(
        self, event_id: str, records: list[DeliveryRecord], lock: tuple[str, int, set[str]] | None = None
    ) -> list[DeliveryRecord]:
        """Store records that do not exist yet; return the stored state of every record.

        `lock`: (owner, ttl, ids): the send locks of those new records are taken in the same round trip,
        and the records returned hold them (see `update`).
        """
        if not records:
            return []
        owner, ttl, to_lock = lock if lock is not None else ("", 1, set())
        keys = [event_deliveries_key(event_id), DELIVERIES, FAILED, METRICS]
        args: list[Any] = [self.retention, owner, ttl]
        for record in records:
            keys += [delivery_key(record.id), lock_key(record.id)]
            fields = record.to_hash()
            labels = {"state": record.state, "channel": record.channel, "kind": record.kind}
            metric = metric_field("relay_deliveries_total", **labels)
            failed = int(record.state == State.FAILED.value)
            args += [record.id, repr(record.createdAt), failed, int(record.id in to_lock), metric, len(fields)]
            for pair in fields.items():
                args.extend(pair)
        outcome = [int(v) for v in self._create(keys=keys, args=args)]
        for record, made in zip(records, outcome, strict=True):
            record.held_lock = made == 2
        if all(outcome):
            return records  # all new: they are stored exactly as given
        existing = iter(self.deliveries([r.id for r, made in zip(records, outcome, strict=True) if not made]))
        stored: list[DeliveryRecord] = []
        for record, made in zip(records, outcome, strict=True):
            current = record if made else next(existing)
            if current is not None:  # an existing record may have expired since
                stored.append(current)
        return stored

    def delivery(self, delivery_id_: str) -> DeliveryRecord | None:
        data = self.redis.hgetall(delivery_key(delivery_id_))
        if not data:
            return None
        return DeliveryRecord.from_hash({_text(k): _text(v) for k, v in data.items()})

    def deliveries(self, ids: Iterable[str]) -> list[DeliveryRecord | None]:
        ids = list(ids)
        pipe = self.redis.pipeline(transaction=False)
        for i in ids:
            pipe.hgetall(delivery_key(i))
        out: list[DeliveryRecord | None] = []
        for data in pipe.execute():
            out.append(DeliveryRecord.from_hash({_text(k): _text(v) for k, v in data.items()}) if data else None)
        return out

    def update(
        self,
        record: DeliveryRecord,
        previous_state: str,
        latency_from: float | None = None,
        send_seconds: float | None = None,
        **metric_labels: str,
    ) -> None:
        """Store the record; with `latency_from` and `send_seconds`, count the end-to-end latency and the
        duration of the send in the same round trip. A record that holds its send lock lets go of it."""
        self.update_many([Outcome(record, previous_state, latency_from, send_seconds, metric_labels)])

    def update_many(self, outcomes: list[Outcome]) -> None:
        """`update` for several records, in one round trip."""
        keys: list[str] = [FAILED, METRICS]
        args: list[Any] = [self.retention]
        for outcome in outcomes:
            record, previous_state = outcome.record, outcome.previous_state
            record.updatedAt = now()
            failed = "-"
            if record.state == State.FAILED.value:
                failed = "add"
            elif previous_state == State.FAILED.value:
                failed = "rem"
            ints: list[tuple[str, int]] = []
            floats: list[tuple[str, float]] = []
            if record.state != previous_state:
                labels = {"state": record.state, "channel": record.channel, "kind": record.kind, **outcome.labels}
                ints.append((metric_field("relay_deliveries_total", **labels), 1))
            if outcome.latency_from is not None:
                self._observe(ints, floats, LATENCY, max(0.0, record.updatedAt - outcome.latency_from))
            if outcome.send_seconds is not None:
                self._observe(ints, floats, SEND_LATENCY, outcome.send_seconds, channel=record.channel)
            fields = record.to_hash()
            keys += [delivery_key(record.id), lock_key(record.id)]
            args += [record.id, repr(record.updatedAt), failed, int(record.held_lock), len(fields)]
            for pair in fields.items():
                args.extend(pair)
            args += [len(ints), len(floats)]
            for name, amount in ints:
                args.extend((name, amount))
            for name, value in floats:
                args.extend((name, repr(value)))
        if outcomes:
            self._update(keys=keys, args=args)
        for outcome in outcomes:
            outcome.record.held_lock = False

    def reserve_slot(self, channel: str, rate: float) -> float:
        """Book the channel's next send slot (at most `rate` a second); seconds until it comes."""
        return float(self._reserve(keys=[f"{PREFIX}rate:{channel}"], args=[1.0 / rate]))

    def lock_and_read(self, delivery_id_: str, owner: str, ttl: int) -> tuple[bool, DeliveryRecord | None]:
        """Take the delivery's send lock and read its record as it is now; the record, when the lock
        was taken, holds the lock (see `update`)."""
        taken, *rest = self._lock_and_read(keys=[lock_key(delivery_id_), delivery_key(delivery_id_)], args=[owner, ttl])
        if not taken:
            return False, None
        flat = rest[0] if rest else []
        if not flat:
            return True, None
        record = DeliveryRecord.from_hash({_text(k): _text(v) for k, v in hash_pairs(flat).items()})
        record.held_lock = True
        return True, record

    def unlock(self, delivery_id_: str) -> None:
        self.redis.delete(lock_key(delivery_id_))

    def iter_recent(self, since: float | None = None, index: str = DELIVERIES) -> Iterator[DeliveryRecord]:
        """Deliveries newest first, read in pages, at most SCAN_LIMIT index entries."""
        low: float | str = since if since is not None else "-inf"
        offset, page = 0, 200
        while offset < SCAN_LIMIT:
            ids = [_text(v) for v in self.redis.zrevrangebyscore(index, "+inf", low, start=offset, num=page)]
            if not ids:
                return
            offset += len(ids)
            for record in self.deliveries(ids):
                if record is not None:
                    yield record
            if len(ids) < page:
                return

    def prune(self) -> None:
        """Drop index entries older than the retention (their records have expired already)."""
        cutoff = now() - self.retention
        pipe = self.redis.pipeline(transaction=False)
        for index in (EVENTS, DELIVERIES, FAILED):
            pipe.zremrangebyscore(index, "-inf", cutoff)
        pipe.execute()

    # -- metrics and liveness -------------------------------------------------------------------

    def incr(self, name: str, amount: int = 1, **labels: str) -> None:
        self.redis.hincrby(METRICS, metric_field(name, **labels), amount)

    @staticmethod
    def _observe(
        ints: list[tuple[str, int]], floats: list[tuple[str, float]], name: str, seconds: float, **labels: str
    ) -> None:
        """One duration into a shared histogram: only its own bucket is counted here (three increments,
        not one per bucket); /metrics adds the buckets up into Prometheus' cumulative ones."""
        bound = next((f"{b:g}" for b in LATENCY_BUCKETS if seconds <= b), "+Inf")
        ints.append((metric_field(name + "_slot", le=bound, **labels), 1))
        ints.append((metric_field(name + "_count", **labels), 1))
        floats.append((metric_field(name + "_sum", **labels), seconds))

    def counters(self) -> dict[str, float]:
        return {_text(k): float(v) for k, v in self.redis.hgetall(METRICS).items()}

    def heartbeat(self, worker: str) -> None:
        self.redis.zadd(WORKERS, {worker: now()})

    def workers_seen(self, within: float) -> list[str]:
        cutoff = now() - within
        pipe = self.redis.pipeline(transaction=False)
        pipe.zremrangebyscore(WORKERS, "-inf", now() - 3600)
        pipe.zrangebyscore(WORKERS, cutoff, "+inf")
        return [_text(v) for v in pipe.execute()[1]]


def parse_since(value: str | None) -> float | None:
    """`since` as a duration back from now ("2h") or an ISO 8601 time."""
    if value is None or value == "":
        return None
    from relay.core.durations import parse_duration

    try:
        return now() - parse_duration(value)
    except ValueError:
        pass
    text = value.strip().replace("Z", "+00:00")
    parsed = datetime.fromisoformat(text)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()
