"""The lists of deliveries, newest first, read from an index in time that does not grow with what is retained.

One sorted set per (state, channel, kind) in use, scored by `createdAt`, kept by the scripts that write records; a
listing merges the newest entries of the sets its filters match, after a cursor: a page costs the same at any depth.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from itertools import islice
from typing import Any

from redis import Redis

from relay.storage.records import PREFIX, _text, delivery_key, key_part

LISTS = PREFIX + "lists"  # set of the list keys in use
LIST_PREFIX = PREFIX + "list:"  # + state:channel:kind (channel and kind as `key_part`s)
CURSOR_PATTERN = r"^[0-9][0-9.e+-]{0,30}~[A-Za-z0-9_.-]{1,200}$"


def list_rest(channel: str, kind: str) -> str:
    return f":{key_part(channel)}:{key_part(kind)}"


def list_key(state: str, channel: str, kind: str) -> str:
    return LIST_PREFIX + state + list_rest(channel, kind)


def _unpart(value: str) -> str:
    return value.replace("%3A", ":").replace("%25", "%")


@dataclass(frozen=True)
class ListName:
    key: str
    state: str
    channel: str
    kind: str


def parse_list_key(key: str) -> ListName | None:
    parts = key.removeprefix(LIST_PREFIX).split(":")
    if not key.startswith(LIST_PREFIX) or len(parts) != 3:
        return None
    return ListName(key, parts[0], _unpart(parts[1]), _unpart(parts[2]))


# Entries older than the cutoff leave every list, and an empty list the registry; in the lists of a state that
# waits, only those whose record is gone: a delivery is kept while it waits, however old.
# KEYS: the registry. ARGV: cutoff, the waiting states' list prefixes, the record key prefix.
PRUNE = """
local waits = {}
for p in string.gmatch(ARGV[2], '[^ ]+') do waits[#waits + 1] = p end
for _, key in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local waiting = false
  for _, p in ipairs(waits) do if string.sub(key, 1, #p) == p then waiting = true end end
  if waiting then
    for _, id in ipairs(redis.call('ZRANGEBYSCORE', key, '-inf', ARGV[1])) do
      if redis.call('EXISTS', ARGV[3] .. id) == 0 then redis.call('ZREM', key, id) end
    end
  else
    redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
  end
  if redis.call('EXISTS', key) == 0 then redis.call('SREM', KEYS[1], key) end
end
return 1
"""
WAITING = " ".join(LIST_PREFIX + s + ":" for s in ("queued", "held", "retrying"))


@dataclass(frozen=True)
class Cursor:
    """Where a page ends: the last entry shown. Opaque to clients: `<score>~<id>`."""

    score: str
    id: str

    def text(self) -> str:
        return f"{self.score}~{self.id}"

    @classmethod
    def parse(cls, text: str) -> Cursor:
        if not re.match(CURSOR_PATTERN, text):
            raise ValueError(f"cursor {text!r} is not one a listing gave")
        score, ident = text.split("~", 1)
        float(score)  # raises on anything but a number
        return cls(score, ident)


def merge(
    read: Mapping[str, Sequence[tuple[bytes, float]]], counts: Mapping[str, int], cursor: Cursor | None, want: int
) -> tuple[list[tuple[str, str, str]], bool]:
    """The newest `want` (id, score, list) entries after the cursor, by score then id (as a sorted set orders);
    and whether they are the page: not when a list read to its count may hold more above the page's last."""
    runs = [[(score, ident, key) for ident, score in entries] for key, entries in read.items()]
    if cursor is not None:  # those at the cursor's score and not below its id were shown already
        top, after = float(cursor.score), cursor.id.encode()
        runs = [[e for e in run if e[0] != top or e[1] < after] for run in runs]
    merged = list(islice(heapq.merge(*runs, reverse=True), want))
    # The last entry read of each list read to its count: what follows it may be in the page unless it is below.
    deeper = ((entries[-1][1], entries[-1][0]) for key, entries in read.items() if len(entries) == counts[key])
    whole = all(len(merged) == want and last <= merged[-1][:2] for last in deeper)
    return [(_text(ident), repr(score), key) for score, ident, key in merged], whole


def _pairs(reply: Any) -> list[tuple[bytes, float]]:
    """A ZREVRANGEBYSCORE ... WITHSCORES reply as the server sent it: (member, score) pairs on RESP3, flat on RESP2."""
    if reply and isinstance(reply[0], list):
        return [(member, float(score)) for member, score in reply]
    return list(zip(reply[::2], map(float, reply[1::2]), strict=True))


class Lists:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._prune = redis.register_script(PRUNE)
        self._parsed: dict[str, ListName | None] = {}  # a key's parts, parsed once (a few hundred keys)
        # How many entries of each list the last page took: the next reads as many first, so one read is the page.
        self._took: dict[str, int] = {}

    def names(self, state: str | None, channel: str | None, kind: str | None) -> list[str]:
        """The keys of the lists in use that these filters match (`kind` a glob, as the filters take it)."""
        found = []
        for raw in self.redis.smembers(LISTS):
            key = _text(raw)
            if key not in self._parsed:
                self._parsed[key] = parse_list_key(key)
            name = self._parsed[key]
            if name is None or (state is not None and name.state != state):
                continue
            if (channel and name.channel != channel) or (kind and not fnmatchcase(name.kind, kind)):
                continue
            found.append(name.key)
        return sorted(found)

    def page(
        self,
        state: str | None = None,
        channel: str | None = None,
        kind: str | None = None,
        since: float | None = None,
        limit: int = 50,
        cursor: Cursor | None = None,
    ) -> tuple[list[tuple[str, str]], Cursor | None]:
        """The newest `limit` (id, score) entries after the cursor, and the next page's cursor (None: no more)."""
        keys = self.names(state, channel, kind)
        if not keys:
            return [], None
        top, low = cursor.score if cursor is not None else "+inf", repr(since) if since is not None else "-inf"
        want, bottom = limit + 1, low
        # About twice each list's share of the page, or one more than the last page took of it.
        share = -(-2 * want // len(keys))
        counts = {key: min(want, max(share, self._took.get(key, 0) + 1)) for key in keys}
        while True:
            pipe = self.redis.pipeline(transaction=True)  # every list read in one snapshot, as by one script
            for key in keys:  # as sent (no pairs made by the client: a page reads hundreds of lists)
                read = ("ZREVRANGEBYSCORE", key, top, bottom, "WITHSCORES", "LIMIT", 0, counts[key])
                pipe.execute_command(*read)  # type: ignore[no-untyped-call]
            lists = {key: _pairs(reply) for key, reply in zip(keys, pipe.execute(), strict=True)}
            found, whole = merge(lists, counts, cursor, want)
            if whole and (len(found) == want or bottom == low):
                break
            # Again, deeper, down to the page's last entry so far (to `low` if entries left meanwhile).
            bottom = found[-1][1] if len(found) == want else low
            counts = {key: max(want, 2 * count) for key, count in counts.items()}
        # How deep the page went in each list: its entries at or above the page's last, shown or skipped.
        last = (float(found[-1][1]), found[-1][0].encode()) if found else (math.inf, b"")
        self._took.update((key, sum(1 for i, score in lists[key] if (score, i) >= last)) for key in keys)
        entries = [(ident, score) for ident, score, _ in found]
        more = len(entries) > limit
        entries = entries[:limit]
        return entries, Cursor(entries[-1][1], entries[-1][0]) if more else None

    def prune(self, cutoff: float) -> None:
        self._prune(keys=[LISTS], args=[repr(cutoff), WAITING, delivery_key("")])
