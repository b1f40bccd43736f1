"""The lists of deliveries, newest first, read from an index in time that does not grow with what is retained.

One sorted set per (state, channel, kind) a delivery was stored in, scored by its creation time (`createdAt`,
the order listings have always had), holds each retained delivery once: the scripts that write a record
(`relay.storage.scripts`: CREATE, UPDATE, GATHER) put it in its set and take it out of its other states' sets
in the same atomic step. A registry (`relay:lists`, a set) names the sets in use. A listing picks the sets its
filters match (states x channels x kinds in use: a few hundred at most) and merges their newest entries in one
script (`PAGE`), a page at a time: a cursor is the last entry shown, (score, id), and the next page starts
after it, so a page costs the same at any depth. Its cost grows with the sets merged, never with the
deliveries retained. Pruned with the retention (`Lists.prune`).

An earlier relay indexed every delivery in one set by creation time (`relay:deliveries`); the first listing
after an upgrade moves those entries into today's sets (`Lists.backfill`, once, in steps of BACKFILL_STEP).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase

from redis import Redis

from relay.core.states import State
from relay.storage.records import DELIVERIES, PREFIX, _text, delivery_key, key_part

log = logging.getLogger("relay.storage")

LISTS = PREFIX + "lists"  # set of the list keys in use
LIST_PREFIX = PREFIX + "list:"  # + state:channel:kind (channel and kind as `key_part`s)
BACKFILL_STEP = 1000
# Entries read from one list at a time while merging: the newest 50 of 100 lists read at most 1,600.
MERGE_BATCH = 16
CURSOR_PATTERN = r"^[0-9][0-9.e+-]{0,30}~[A-Za-z0-9_.-]{1,200}$"


def list_rest(channel: str, kind: str) -> str:
    """What follows the state in the key of a delivery's list."""
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


# Move a delivery into the list of its state (the lists of its other states lose it): every write of a record
# calls it, in the same script. ARGV-free: the caller passes the id, the score, the state and `list_rest`.
RELIST_LUA = f"""
local LIST_STATES = {{{", ".join(repr(s.value) for s in State)}}}
local function relist(id, score, state, rest)
  for _, s in ipairs(LIST_STATES) do
    if s ~= state then redis.call('ZREM', '{LIST_PREFIX}' .. s .. rest, id) end
  end
  local into = '{LIST_PREFIX}' .. state .. rest
  redis.call('ZADD', into, score, id)
  redis.call('SADD', '{LISTS}', into)
end
"""

# The newest `want` entries of the lists in KEYS, merged, at or below the highest score and above (or at) the
# lowest; with a cursor's id, those at the highest score whose id is not below it are skipped (shown already).
# Ties are broken by id, in byte order as a sorted set orders equal scores (Lua's `<` on strings follows the
# server's locale: compared byte by byte here). ARGV: highest score, cursor id ('' none), lowest score, want.
# Returns id, score, id, score, ... newest first.
PAGE = f"""
local top, after, low, want = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local top_n = tonumber(top)
-- Read first from each list about its share of the page: most of many lists give none or one entry to it.
local first = math.max(1, math.min({MERGE_BATCH}, math.ceil(2 * want / #KEYS)))
local function below(a, b)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a < #b
end
local lists = {{}}
local function head(k)
  local l = lists[k]
  while true do
    if l.pos > #l.buf then
      if l.done then return nil end
      local batch = l.offset == 0 and first or {MERGE_BATCH}
      l.buf = redis.call('ZREVRANGEBYSCORE', KEYS[k], top, low, 'WITHSCORES', 'LIMIT', l.offset, batch)
      l.offset = l.offset + #l.buf / 2
      l.pos = 1
      l.done = #l.buf < 2 * batch
      if #l.buf == 0 then return nil end
    end
    local id, score = l.buf[l.pos], l.buf[l.pos + 1]
    if after ~= '' and tonumber(score) == top_n and not below(id, after) then
      l.pos = l.pos + 2
    else
      return {{id, tonumber(score), score}}
    end
  end
end
-- A max-heap of the lists' heads, the newest on top (by score, then id).
local heap = {{}}
local function before(a, b)
  if a[2] ~= b[2] then return a[2] > b[2] end
  return below(b[1], a[1])
end
local function push(h)
  heap[#heap + 1] = h
  local i = #heap
  while i > 1 do
    local p = math.floor(i / 2)
    if not before(heap[i], heap[p]) then break end
    heap[i], heap[p] = heap[p], heap[i]
    i = p
  end
end
local function pop()
  local top_h = heap[1]
  heap[1] = heap[#heap]
  heap[#heap] = nil
  local i = 1
  while true do
    local l, r, m = 2 * i, 2 * i + 1, i
    if l <= #heap and before(heap[l], heap[m]) then m = l end
    if r <= #heap and before(heap[r], heap[m]) then m = r end
    if m == i then break end
    heap[i], heap[m] = heap[m], heap[i]
    i = m
  end
  return top_h
end
for k = 1, #KEYS do
  lists[k] = {{buf = {{}}, pos = 1, offset = 0, done = false}}
  local h = head(k)
  if h then h[4] = k; push(h) end
end
local out = {{}}
while #out < 2 * want and #heap > 0 do
  local h = pop()
  out[#out + 1] = h[1]
  out[#out + 1] = h[3]
  lists[h[4]].pos = lists[h[4]].pos + 2
  local nxt = head(h[4])
  if nxt then nxt[4] = h[4]; push(nxt) end
end
return out
"""

# Entries older than the cutoff leave every list (their records have expired); a list left empty leaves the
# registry, in the same step (a write that fills it again adds it back). KEYS: the registry. ARGV: cutoff.
PRUNE = """
for _, key in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  redis.call('ZREMRANGEBYSCORE', key, '-inf', ARGV[1])
  if redis.call('EXISTS', key) == 0 then redis.call('SREM', KEYS[1], key) end
end
return 1
"""

# Move up to ARGV[1] entries of an earlier relay's index of every delivery into today's lists, each by its
# record's state, channel and kind as stored now (read in the same step: a write since is not undone); an
# entry whose record is gone, or is no hash relay wrote, is dropped.
# KEYS: the earlier index, the registry. ARGV: how many, the record key prefix. Returns how many were moved.
BACKFILL = f"""
local function part(v) return (string.gsub(string.gsub(v, '%%', '%%25'), ':', '%%3A')) end
local ids = redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
for _, id in ipairs(ids) do
  local f = {{}}
  if redis.call('TYPE', ARGV[2] .. id)['ok'] == 'hash' then
    f = redis.call('HMGET', ARGV[2] .. id, 'state', 'channel', 'kind', 'updatedAt', 'createdAt')
  end
  if f[2] then
    local key = '{LIST_PREFIX}' .. (f[1] or 'queued') .. ':' .. part(f[2]) .. ':' .. part(f[3] or '')
    redis.call('ZADD', key, f[5] or f[4] or '0', id)
    redis.call('SADD', KEYS[2], key)
  end
  redis.call('ZREM', KEYS[1], id)
end
return #ids
"""


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


class Lists:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._page = redis.register_script(PAGE)
        self._prune = redis.register_script(PRUNE)
        self._backfill = redis.register_script(BACKFILL)
        self._backfilled = False
        self._parsed: dict[str, ListName | None] = {}  # a key's parts, parsed once (a few hundred keys)

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
        """The newest `limit` (id, score) entries after the cursor, and the cursor of the next page (None: no
        more). Three round trips: the registry, the merge, and (once per process) the earlier index's check."""
        self.backfill()
        keys = self.names(state, channel, kind)
        if not keys:
            return [], None
        top, after = (cursor.score, cursor.id) if cursor is not None else ("+inf", "")
        low = repr(since) if since is not None else "-inf"
        flat = [_text(v) for v in self._page(keys=keys, args=[top, after, low, limit + 1])]
        entries = list(zip(flat[::2], flat[1::2], strict=True))
        more = len(entries) > limit
        entries = entries[:limit]
        return entries, Cursor(entries[-1][1], entries[-1][0]) if more else None

    def prune(self, cutoff: float) -> None:
        self._prune(keys=[LISTS], args=[repr(cutoff)])

    def backfill(self) -> None:
        """Index the deliveries an earlier relay stored (once: their index is emptied as it goes)."""
        if self._backfilled:
            return
        moved = 0
        while True:
            step = int(self._backfill(keys=[DELIVERIES, LISTS], args=[BACKFILL_STEP, delivery_key("")]))
            moved += step
            if step < BACKFILL_STEP:
                break
        if moved:
            log.info("indexed %d deliveries an earlier relay stored, for the lists", moved)
        self._backfilled = True
