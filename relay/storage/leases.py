"""Who works on what: the one ownership mechanism of relay's workers, and its one liveness signal (docs/delivery.md,
"One ownership mechanism: the lease", "One liveness signal", "The in-process ledger").

A unit (`e:<event id>` in `UNPLANNED`, `d:<delivery id>` in `READY`) is leased in the step that takes it out of
its set; the write that stores the outcome drops the lease.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from redis import Redis

from relay.storage.records import PREFIX, _text
from relay.storage.tally import Counts

UNPLANNED = PREFIX + "unplanned"  # zset event id -> received (or given back) time: notifications to plan
READY = PREFIX + "ready"  # zset delivery id -> when it may go: deliveries to send
LEASES = PREFIX + "leases"  # hash unit -> worker: the units a worker has taken
LOSSES = PREFIX + "lease-losses"  # hash unit -> times its work was lost (its worker died, or it raised)
SLOTS = PREFIX + "slots"  # hash delivery id -> the rate-limit slot it booked (it sends then, not booking again)
# The queued, not yet started wake-up job's id: one queued at a time, however many notifications arrive.
WAKE = PREFIX + "wake"
WAKE_TTL = 30
LOSS_TTL = 24 * 3600
# A unit whose work was lost this many times is given up: one that kills its worker must not go round forever.
MAX_LOSSES = 3
# A due unit found leased to another worker (it is working on it this moment) is looked at again this much later.
RECHECK_SECONDS = 5.0
GIVEN_UP = "relay_planning_given_up_total"  # the counter (in the metrics hash) of the notifications dropped

EVENT, DELIVERY = "e:", "d:"


def event_unit(event_id: str) -> str:
    return EVENT + event_id


def delivery_unit(delivery_id: str) -> str:
    return DELIVERY + delivery_id


def split_unit(unit: str) -> tuple[str, str]:
    return unit[:2], unit[2:]


# Take up to ARGV[3] due units for ARGV[1], oldest first across both sets. A unit leased to another worker goes
# back at ARGV[5]; a unit lost before is taken alone, so that a loss counts against it and not against a batch.
# ARGV[4] 1 (a job's start) clears the wake-up flag. KEYS: unplanned, ready, leases, losses, wake flag, slots.
# Returns the count still due and the units taken, flat: unit, score, booked slot ('' for none).
_CLAIM = """
if ARGV[4] == '1' then redis.call('DEL', KEYS[5]) end
local out, taken, looked, want = {}, 0, 0, tonumber(ARGV[3])
while taken < want and looked < 4 * want + 8 do
  looked = looked + 1
  local e = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', 0, 1)
  local d = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[2], 'WITHSCORES', 'LIMIT', 0, 1)
  if #e == 0 and #d == 0 then break end
  local set, first, prefix = KEYS[2], d, 'd:'
  if #e > 0 and (#d == 0 or tonumber(e[2]) <= tonumber(d[2])) then set, first, prefix = KEYS[1], e, 'e:' end
  local member, score, unit = first[1], first[2], prefix .. first[1]
  redis.call('ZREM', set, member)
  if redis.call('HEXISTS', KEYS[3], unit) == 1 then
    redis.call('ZADD', set, ARGV[5], member)
  else
    local suspect = redis.call('HEXISTS', KEYS[4], unit) == 1
    if suspect and taken > 0 then
      redis.call('ZADD', set, score, member)
      break
    end
    redis.call('HSET', KEYS[3], unit, ARGV[1])
    local slot = set == KEYS[2] and redis.call('HGET', KEYS[6], member) or ''
    if slot ~= '' then redis.call('HDEL', KEYS[6], member) end
    out[#out + 1] = unit
    out[#out + 1] = score
    out[#out + 1] = slot
    taken = taken + 1
    if suspect then break end
  end
end
local left = redis.call('ZCOUNT', KEYS[1], '-inf', ARGV[2]) + redis.call('ZCOUNT', KEYS[2], '-inf', ARGV[2])
return {left, out}
"""

# Put the units ARGV[1] still leases back, due at ARGV[2]; when ARGV[3] is 1, count a loss against each and give
# up those lost ARGV[4] times instead. KEYS: unplanned, ready, leases, losses, metrics. ARGV: owner, due, count
# (1/0), max losses, the losses' ttl, then the units. Returns how many went back and the units given up.
_GIVE_BACK = """
local back, given_up = 0, {}
for i = 6, #ARGV do
  local unit = ARGV[i]
  if redis.call('HGET', KEYS[3], unit) == ARGV[1] then
    redis.call('HDEL', KEYS[3], unit)
    local losses = ARGV[3] == '1' and redis.call('HINCRBY', KEYS[4], unit, 1) or 0
    local kind, member = string.sub(unit, 1, 2), string.sub(unit, 3)
    if losses >= tonumber(ARGV[4]) then
      given_up[#given_up + 1] = unit
      if kind == 'e:' then redis.call('HINCRBY', KEYS[5], '@GIVEN_UP@', 1) end
    else
      redis.call('ZADD', kind == 'e:' and KEYS[1] or KEYS[2], 'NX', ARGV[2], member)
      back = back + 1
    end
  end
end
if ARGV[3] == '1' then redis.call('EXPIRE', KEYS[4], ARGV[5]) end
return {back, given_up}
""".replace("@GIVEN_UP@", GIVEN_UP)

# Drop the leases ARGV[1] holds on ARGV[2..]. KEYS: leases.
_RELEASE = """
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 1
"""


@dataclass(frozen=True)
class Claimed:
    """A unit taken: what it is, when it was due, and the rate-limit slot a delivery booked (if any)."""

    unit: str
    due: float
    slot: float | None = None

    @property
    def kind(self) -> str:
        return split_unit(self.unit)[0]

    @property
    def ident(self) -> str:
        return split_unit(self.unit)[1]


def beat_alive(last: float, now: float, after: float) -> bool:
    """The one judgement of a worker's heartbeat, wherever it is read (`after`: `dead_worker_after`)."""
    return now - last <= after


def orphaned(
    leases: Mapping[str, str], beats: Mapping[str, float], now: float, grace: float, first_seen: dict[str, float]
) -> dict[str, list[str]]:
    """The leased units of each worker not seen beating within `grace`; an owner that never beat (killed first,
    or an API process releasing) is timed from when a sweep first saw it (`first_seen`, kept by the caller)."""
    found: dict[str, list[str]] = defaultdict(list)
    owners = set(leases.values())
    for gone in set(first_seen) - owners:
        del first_seen[gone]
    for unit, owner in leases.items():
        last = beats.get(owner)
        if last is None:
            last = first_seen.setdefault(owner, now)
        if not beat_alive(last, now, grace):
            found[owner].append(unit)
    return dict(found)


class Leases:
    def __init__(self, redis: Redis, counts: Counts | None = None) -> None:
        self.redis = redis
        self.counts = counts if counts is not None else Counts()  # where this process counts
        self._claim = redis.register_script(_CLAIM)
        self._give_back = redis.register_script(_GIVE_BACK)
        self._release = redis.register_script(_RELEASE)
        # Claimed and not yet handed on: the sweep of this worker's own leases leaves them alone.
        self._lock = threading.Lock()
        self._in_hand: set[str] = set()

    def claim(self, owner: str, count: int, now: float, start: bool = False) -> tuple[list[Claimed], int]:
        """`start`: a job's start, which clears the wake-up flag; the units taken and how many are still due."""
        left, flat = self._claim(
            keys=[UNPLANNED, READY, LEASES, LOSSES, WAKE, SLOTS],
            args=[owner, repr(now), count, int(start), repr(now + RECHECK_SECONDS)],
        )
        claimed = [
            Claimed(_text(u), float(d), float(_text(s)) if _text(s) else None)
            for u, d, s in zip(flat[::3], flat[1::3], flat[2::3], strict=True)
        ]
        with self._lock:
            self._in_hand.update(c.unit for c in claimed)
        return claimed, int(left)

    def handed_on(self, units: Iterable[str]) -> None:
        with self._lock:
            self._in_hand.difference_update(units)

    def in_hand(self) -> set[str]:
        with self._lock:
            return set(self._in_hand)

    def give_back(self, owner: str, units: Iterable[str], now: float, failed: bool = False) -> tuple[int, list[str]]:
        """`failed`: count a loss against each; the caller fails the deliveries given up (notifications are
        dropped and counted here)."""
        units = list(units)
        self.handed_on(units)
        if not units:
            return 0, []
        args: list[Any] = [owner, repr(now), int(failed), MAX_LOSSES, LOSS_TTL, *units]
        back, given_up = self._give_back(keys=[UNPLANNED, READY, LEASES, LOSSES, self.counts.key], args=args)
        return int(back), [_text(u) for u in given_up]

    def release(self, units: Iterable[str], owner: str) -> None:
        units = list(units)
        self.handed_on(units)
        if units:
            self._release(keys=[LEASES], args=[owner, *units])

    def take_and_read(self, delivery_id: str, owner: str, record_key: str) -> tuple[bool, dict[Any, Any]]:
        """Lease and read in one MULTI: (False, {}) when another holds it."""
        pipe = self.redis.pipeline(transaction=True)
        pipe.hsetnx(LEASES, delivery_unit(delivery_id), owner)
        pipe.hgetall(record_key)
        taken, fields = pipe.execute()
        return bool(taken), fields if taken else {}

    def schedule(self, at: Mapping[str, float], slots: Mapping[str, float] | None = None) -> None:
        if not at:
            return
        pipe = self.redis.pipeline(transaction=True)
        pipe.zadd(READY, dict(at))
        if slots:
            pipe.hset(SLOTS, mapping={k: repr(v) for k, v in slots.items()})
        pipe.execute()

    def due_times(self, ids: list[str]) -> dict[str, float]:
        """When each of these is due (those that are), as the work queue has it."""
        scores = self.redis.zmscore(READY, ids) if ids else []
        return {i: float(t) for i, t in zip(ids, scores, strict=True) if t is not None}

    def held(self) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.redis.hgetall(LEASES).items()}

    def oldest_due(self, now: float) -> float | None:
        """When the longest-waiting due unit came due, if any is due."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.zrangebyscore(UNPLANNED, "-inf", repr(now), start=0, num=1, withscores=True)
        pipe.zrangebyscore(READY, "-inf", repr(now), start=0, num=1, withscores=True)
        found = [float(first[0][1]) for first in pipe.execute() if first]
        return min(found) if found else None
