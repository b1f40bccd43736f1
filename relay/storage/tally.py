"""What this process counted itself, for its own /metrics; and the bound on the kinds given a series.

Every count is kept twice: in the Redis metrics hash (the fleet's totals, for the admin page and `relay
status`, written in the same atomic script as the change it counts) and here, in this process's `Tally`,
once that script has run. /metrics shows the tally only, so that summed over every scraped process each
counter is the fleet's true count, whatever the number of API and worker processes (docs/fleet.md).

`relay serve`'s workers write their tallies to files in a directory serve gives them (`write_tally`), and
serve's /metrics adds them to its own (`read_tallies`): one scrape of serve is the whole box. The file of
a worker that died stays, so serve's counters never go down when a worker is restarted.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from redis import Redis
from redis.asyncio import Redis as AsyncRedis

from relay.storage.records import PREFIX

KINDS = PREFIX + "metric-kinds"  # the kinds given their own series, fleet-wide (a set of at most max_kinds)
OTHER_KIND = "other"
_REJECTED_REMEMBERED = 1024  # kinds refused a series remembered here, so each costs one look-up, not one per count

# KEYS: the kinds set. ARGV: the kind, the limit. 1 when the kind has (or now got) its own series.
ADMIT_KIND = """
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[2]) then redis.call('SADD', KEYS[1], ARGV[1]) end
return redis.call('SISMEMBER', KEYS[1], ARGV[1])
"""


class Tally:
    """Counter fields (`name|label=value,...`, the Redis hash's) to what this process added to them."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: dict[str, float] = {}
        self.changes = 0  # bumped at each add: a writer of the tally's file skips a write when nothing changed
        self.changed = threading.Event()  # set at each add: wakes the writer of the tally's file

    def add(self, field: str, amount: float = 1) -> None:
        self.add_many([(field, amount)])

    def add_many(self, pairs: Iterable[tuple[str, float]]) -> None:
        with self._lock:
            for field, amount in pairs:
                self._counts[field] = self._counts.get(field, 0) + amount
            self.changes += 1
        self.changed.set()

    def snapshot(self) -> dict[str, float]:
        with self._lock:
            return dict(self._counts)


def write_tally(directory: Path, name: str, counts: dict[str, float]) -> None:
    """This process's tally as `<directory>/<name>.json`, replaced whole (a reader never sees half of it)."""
    path = directory / f"{name}.json"
    part = path.with_suffix(".part")
    part.write_text(json.dumps(counts))
    os.replace(part, path)


def read_tallies(directory: Path) -> dict[str, float]:
    """The sum of the tallies written in `directory` (one unreadable is skipped: it is being replaced)."""
    loaded: list[dict[str, float]] = []
    for path in directory.glob("*.json"):
        try:
            counts: Any = json.loads(path.read_text())
        except (OSError, ValueError):
            continue
        loaded.append({field: float(value) for field, value in counts.items()})
    return add_tallies(*loaded)


def add_tallies(*tallies: dict[str, float]) -> dict[str, float]:
    total: dict[str, float] = {}
    for counts in tallies:
        for field, value in counts.items():
            total[field] = total.get(field, 0) + value
    return total


class KindLabels:
    """The `kind` label of a count: the kind itself for the first `limit` kinds seen fleet-wide (a set in
    Redis), `other` for any after them, so that a sender cannot grow the series and the Redis fields without
    end. Known kinds are remembered in the process; refused ones too, up to a bound."""

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
