"""Leases: which worker has taken a delivery to send it, so that a worker's death loses nothing.

An RQ job hands its deliveries to the worker's senders and ends (`relay.delivery.sender`); from then on RQ
no longer knows about them. Before the job ends, each delivery is leased to the worker (a field of one
hash: delivery id -> worker name), and the update that stores the delivery's outcome removes the lease in
the same script. A lease whose worker stopped beating (`relay:workers`) is orphaned: any live worker queues
its delivery again as an RQ job and drops the lease. The send lock and the record's state make a second
run of a delivery that did go out a no-op, so the worst a sweep can cause is a job that finds nothing to do.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

from redis import Redis

from relay.storage.records import lock_key

LEASES = "relay:leases"  # hash delivery id -> worker name
LOSSES = "relay:lease-losses"  # hash delivery id -> times its worker died holding it
LOSS_TTL = 24 * 3600
# A delivery whose send crashed (or whose worker died while sending it) this many times is failed, not tried
# again: a payload that kills workers must not go round forever.
MAX_LOSSES = 3

# Drop the leases (and the send locks) still held by ARGV[1], a dead worker, and count, for each delivery,
# the times a worker died holding it. KEYS: leases, counts, then each delivery's lock. ARGV: owner, ttl of
# the counts, then the delivery ids.
_SWEEP = """
local out = {}
for i = 3, #ARGV do
  local id = ARGV[i]
  if redis.call('HGET', KEYS[1], id) == ARGV[1] then
    redis.call('HDEL', KEYS[1], id)
    if redis.call('GET', KEYS[i]) == ARGV[1] then redis.call('DEL', KEYS[i]) end
    out[#out + 1] = id
    out[#out + 1] = redis.call('HINCRBY', KEYS[2], id, 1)
  end
end
redis.call('EXPIRE', KEYS[2], ARGV[2])
return out
"""

_RELEASE = """
for i = 2, #ARGV do
  if redis.call('HGET', KEYS[1], ARGV[i]) == ARGV[1] then redis.call('HDEL', KEYS[1], ARGV[i]) end
end
return 1
"""


def orphaned(leases: Mapping[str, str], beats: Mapping[str, float], now: float, grace: float) -> dict[str, list[str]]:
    """The leased delivery ids of each worker not seen beating within `grace` seconds of `now`."""
    found: dict[str, list[str]] = defaultdict(list)
    for delivery, owner in leases.items():
        last = beats.get(owner)
        if last is None or now - last > grace:
            found[owner].append(delivery)
    return dict(found)


class Leases:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._sweep = redis.register_script(_SWEEP)
        self._release = redis.register_script(_RELEASE)

    def take(self, ids: Iterable[str], owner: str) -> None:
        mapping = dict.fromkeys(ids, owner)
        if mapping:
            self.redis.hset(LEASES, mapping=mapping)  # type: ignore[arg-type]

    def release(self, ids: Iterable[str], owner: str) -> None:
        """Drop the leases `owner` still holds on `ids` (one another worker took over stays)."""
        ids = list(ids)
        if ids:
            self._release(keys=[LEASES], args=[owner, *ids])

    def lost(self, ident: str) -> int:
        """Count one more crash of a send of `ident`; the count so far."""
        pipe = self.redis.pipeline(transaction=False)
        pipe.hincrby(LOSSES, ident, 1)
        pipe.expire(LOSSES, LOSS_TTL)
        return int(pipe.execute()[0])

    def held(self) -> dict[str, str]:
        return {_text(k): _text(v) for k, v in self.redis.hgetall(LEASES).items()}

    def sweep(self, owner: str, ids: list[str]) -> dict[str, int]:
        """Take over a dead `owner`'s leases on `ids`: each dropped (by this caller alone) with the send lock
        the owner held, and the times a worker has now died holding it."""
        if not ids:
            return {}
        keys = [LEASES, LOSSES, *(lock_key(i) for i in ids)]
        flat = self._sweep(keys=keys, args=[owner, LOSS_TTL, *ids])
        return {_text(k): int(v) for k, v in zip(flat[::2], flat[1::2], strict=True)}


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)
