"""Where relay counts: hashes in Redis, the one source of every counter and histogram (docs/fleet.md, "Metrics of a
fleet"). Every count is a field (`name|label=value,...`) incremented in the same atomic script or transaction as the
change it counts, in this process's own hash while it serves /metrics (`Counts.serve_as`), in `relay serve`'s for its
workers (`Counts.join`), else in the fleet's; a process that stops adds its own hash to the fleet's
(`Counts.retire`), and the fleet's totals are that hash plus the live ones (`fleet_totals`)."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis
from redis.exceptions import RedisError

from relay.storage.records import METRICS, PREFIX, _text

SOURCES = PREFIX + "metric-sources"  # the processes counting in a hash of their own now
KINDS = PREFIX + "metric-kinds"  # the kinds given their own series, fleet-wide (a set of at most max_kinds)
OTHER_KIND = "other"
_REJECTED_REMEMBERED = 1024  # kinds refused a series remembered here, so each costs one look-up, not one per count

# KEYS: the kinds set. ARGV: the kind, the limit. 1 when the kind has (or now got) its own series.
ADMIT_KIND = """
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then redis.call('SADD', KEYS[1], ARGV[1]) end
return redis.call('SISMEMBER', KEYS[1], ARGV[1])
"""
# KEYS: the fleet's hash, a process's own, the sources. ARGV: the process. Its counts join the fleet's, at once.
RETIRE = """
local counts = redis.call('HGETALL', KEYS[2])
for i = 1, #counts, 2 do redis.call('HINCRBYFLOAT', KEYS[1], counts[i], counts[i + 1]) end
redis.call('DEL', KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
"""


def own_key(source: str) -> str:
    return f"{METRICS}:{source}"


def _floats(raw: dict[Any, Any]) -> dict[str, float]:
    return {_text(k): float(v) for k, v in raw.items()}


@dataclass
class Counts:
    """`key` is read at each count: a process starts serving /metrics after its parts were built."""

    key: str = METRICS
    source: str | None = None

    def serve_as(self, redis: Redis, source: str) -> None:
        self.key, self.source = own_key(source), source
        with contextlib.suppress(RedisError):  # Redis not up yet: each read of the hash names it again
            redis.sadd(SOURCES, source)

    def join(self, source: str) -> None:
        """Count in `source`'s hash (a worker of `relay serve`: serve shows it and adds it up at its stop)."""
        self.key = own_key(source)

    def retire(self, redis: Redis) -> None:
        """A process killed outright leaves its own hash, still summed by `fleet_totals`."""
        if self.source is None:
            return
        source, self.key, self.source = self.source, METRICS, None
        with contextlib.suppress(RedisError):  # Redis down: the hash stays named, summed as one counting now
            redis.eval(RETIRE, 3, METRICS, own_key(source), SOURCES, source)

    def read(self, redis: Redis) -> dict[str, float]:
        """This process's counts (what its /metrics shows). Raises RedisError."""
        pipe = redis.pipeline(transaction=False)
        if self.source is not None:
            pipe.sadd(SOURCES, self.source)
        pipe.hgetall(self.key)
        return _floats(pipe.execute()[-1])


def fleet_totals(redis: Redis) -> dict[str, float]:
    """The fleet's hash and each counting process's, summed. Raises RedisError."""
    sources = sorted(_text(s) for s in redis.smembers(SOURCES))
    pipe = redis.pipeline(transaction=False)
    for key in (METRICS, *map(own_key, sources)):
        pipe.hgetall(key)
    total: dict[str, float] = {}
    for counts in pipe.execute():
        for field, value in _floats(counts).items():
            total[field] = total.get(field, 0) + value
    return total


class KindLabels:
    """The kind itself for the first `limit` kinds seen fleet-wide, `other` after them: a sender cannot grow the
    series without end."""

    def __init__(self, redis: Redis, limit: int = 200) -> None:
        self.redis, self.limit = redis, limit
        self._admit = redis.register_script(ADMIT_KIND)
        self._known: set[str] = set()
        self._refused: set[str] = set()

    def cached(self, kind: str) -> str | None:
        if kind in self._known:
            return kind
        return OTHER_KIND if kind in self._refused else None

    def _remember(self, kind: str, admitted: Any) -> str:
        if int(admitted):
            if len(self._known) < self.limit:
                self._known.add(kind)
            return kind
        if len(self._refused) >= _REJECTED_REMEMBERED:
            self._refused.clear()
        self._refused.add(kind)
        return OTHER_KIND

    def label(self, kind: str) -> str:
        """Raises RedisError when Redis does not answer (only for a kind not remembered)."""
        found = self.cached(kind)
        if found is not None:
            return found
        return self._remember(kind, self._admit(keys=[KINDS], args=[kind, self.limit]))

    async def label_async(self, client: AsyncRedis, kind: str) -> str:
        found = self.cached(kind)
        if found is not None:
            return found
        return self._remember(kind, await client.eval(ADMIT_KIND, 1, KINDS, kind, self.limit))
