"""Planning in batches: the notifications accepted and not planned yet, and the workers' claims on them.

One RQ job per notification costs RQ's own bookkeeping (some 15 round trips) per notification, which under
load is most of a worker's time. So the accept script adds each event to `UNPLANNED` and writes a planning
job only when none is pending (the `PENDING` flag, set with the job); a planning job claims the unplanned
events in batches (`claim`: each moved to `CLAIMS`, event id -> worker, in one script), plans them and
drops each claim once planned. At light load that is still one job per notification, run as soon as it
arrives; under load one job plans many.

Nothing is lost on a crash: the claims of a worker that stopped beating go back to `UNPLANNED` (`give_back`,
from the heartbeat's sweep, `relay.runtime.worker`) with a planning job queued, and events left unplanned
with no job pending (the flag expired, the job lost) are seen by the same sweep. Planning an event twice
stores and sends nothing twice (`Store.create_deliveries` keeps existing records).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from redis import Redis

from relay.storage.records import METRICS, PREFIX, _text

UNPLANNED = PREFIX + "unplanned"  # zset event id -> received time, of the events no worker has claimed yet
CLAIMS = PREFIX + "planning"  # hash event id -> worker, of the events a planning job has claimed
PENDING = PREFIX + "planning:pending"  # set (to a job's id) while a planning job is queued and not started
# The flag's life: a planning job waits in the queue longer only behind a backlog of jobs, and then another
# one is merely written with the next notification.
PENDING_TTL = 30
FAILURES = PREFIX + "planning-failures"  # hash event id -> times its planning raised or its worker died
FAILURES_TTL = 24 * 3600
# A notification whose planning failed this many times is given up (logged), not tried again: one that
# kills its planner must not stop the planning of every other one.
MAX_FAILURES = 3
GIVEN_UP = "relay_planning_given_up_total"  # the counter (in the metrics hash) of the events dropped

# Drop the claims ARGV[1] holds on ARGV[4..] (planned), clear the pending flag when ARGV[3] is 1 (a job's
# start: the next notification queues a new job, which another worker takes), and claim up to ARGV[2] of
# the oldest unplanned events for ARGV[1]. An event that failed before (its planning raised, or its worker
# died with it) is claimed alone, so that a failure counts against it and not against a batch of others.
# KEYS: unplanned, claims, flag, failures. Returns the events left unclaimed and the claimed ones with their
# scores (flat: id, score, ...).
_CLAIM = """
for i = 4, #ARGV do
  if redis.call('HGET', KEYS[2], ARGV[i]) == ARGV[1] then
    redis.call('HDEL', KEYS[2], ARGV[i])
    redis.call('HDEL', KEYS[4], ARGV[i])
  end
end
if ARGV[3] == '1' then redis.call('DEL', KEYS[3]) end
local out = {}
for _ = 1, tonumber(ARGV[2]) do
  local popped = redis.call('ZPOPMIN', KEYS[1])
  if #popped == 0 then break end
  local suspect = redis.call('HEXISTS', KEYS[4], popped[1]) == 1
  if suspect and #out > 0 then
    redis.call('ZADD', KEYS[1], popped[2], popped[1])
    break
  end
  redis.call('HSET', KEYS[2], popped[1], ARGV[1])
  out[#out + 1] = popped[1]
  out[#out + 1] = popped[2]
  if suspect then break end
end
return {redis.call('ZCARD', KEYS[1]), out}
"""

# Put the events ARGV[1] still claims back among the unplanned ones. KEYS: unplanned, claims, failures,
# metrics. ARGV: owner, 1 to count a failure of each (its planning raised, or its worker died with it), the
# failures at which an event is dropped instead, the failure counts' ttl, then pairs of event id and score.
# The drops are counted in the same script (shown in /metrics; an operator looks for them in the log).
# Returns how many went back and the ids dropped.
_GIVE_BACK = """
local back, dropped = 0, {}
for i = 5, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[2], id) == ARGV[1] then
    redis.call('HDEL', KEYS[2], id)
    local failures = 0
    if ARGV[2] == '1' then failures = redis.call('HINCRBY', KEYS[3], id, 1) end
    if failures >= tonumber(ARGV[3]) then
      dropped[#dropped + 1] = id
    else
      redis.call('ZADD', KEYS[1], 'NX', ARGV[i + 1], id)
      back = back + 1
    end
  end
end
if ARGV[2] == '1' then redis.call('EXPIRE', KEYS[3], ARGV[4]) end
if #dropped > 0 then redis.call('HINCRBY', KEYS[4], '@GIVEN_UP@', #dropped) end
return {back, dropped}
""".replace("@GIVEN_UP@", GIVEN_UP)


class Planning:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._claim = redis.register_script(_CLAIM)
        self._give_back = redis.register_script(_GIVE_BACK)
        # The events a planning job of this process has claimed and not planned yet (the heartbeat's
        # sweep of this worker's own claims leaves them alone).
        self._lock = threading.Lock()
        self._in_hand: set[str] = set()

    def claim(
        self, owner: str, count: int, planned: Iterable[str] = (), start: bool = False
    ) -> tuple[list[tuple[str, float]], int]:
        """Drop `owner`'s claims on `planned`, then claim up to `count` of the oldest unplanned events
        (`start`: and clear the pending flag). The events claimed with their scores; how many are left."""
        done = list(planned)
        with self._lock:
            self._in_hand.difference_update(done)
        left, flat = self._claim(keys=[UNPLANNED, CLAIMS, PENDING, FAILURES], args=[owner, count, int(start), *done])
        claimed = [(_text(k), float(v)) for k, v in zip(flat[::2], flat[1::2], strict=True)]
        with self._lock:
            self._in_hand.update(i for i, _ in claimed)
        return claimed, int(left)

    def give_back(self, owner: str, events: list[tuple[str, float]], failed: bool = False) -> tuple[int, list[str]]:
        """Put `owner`'s claims on `events` (id, score) back among the unplanned; `failed`: count a failure
        of each, and drop those failed `MAX_FAILURES` times. How many went back, and the ids dropped."""
        with self._lock:
            self._in_hand.difference_update(i for i, _ in events)
        if not events:
            return 0, []
        args: list[str | int] = [owner, int(failed), MAX_FAILURES, FAILURES_TTL]
        for ident, score in events:
            args += [ident, repr(score)]
        back, dropped = self._give_back(keys=[UNPLANNED, CLAIMS, FAILURES, METRICS], args=args)
        return int(back), [_text(i) for i in dropped]

    def in_hand(self) -> set[str]:
        with self._lock:
            return set(self._in_hand)

    def claims(self) -> dict[str, str]:
        """Every claim: event id -> worker."""
        return {_text(k): _text(v) for k, v in self.redis.hgetall(CLAIMS).items()}

    def oldest(self) -> float | None:
        """When the oldest unplanned event was received (or given back), if any is."""
        first = self.redis.zrange(UNPLANNED, 0, 0, withscores=True)
        return float(first[0][1]) if first else None
