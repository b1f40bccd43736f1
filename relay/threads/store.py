"""Conversations in Redis, two keys each (both expire `thread_for` after their last use): a hash `relay:thread:<id>`
(`root`, `slack` = `<channel id>:<ts>`, `mails` = delivery ids, the first then the latest, and `w:<delivery id>` for
each message waiting its turn) and the line `relay:thread:<id>:line`, a zset of its deliveries by the time their
notification was received. Each step is one script: the order is decided inside Redis, across every worker."""

from __future__ import annotations

from dataclasses import dataclass

from redis import Redis

from relay.storage.leases import LEASES, READY, UNPLANNED
from relay.storage.records import PREFIX, _text, delivery_key, event_key
from relay.threads.model import MAX_REFERENCES, Conversation

UNPLANNED_LOOKED_AT = 100  # the notifications waiting to be planned that a turn reads, soonest due first

# May ARGV[1] go now? Not while a notification received before its own waits to be planned or is being planned
# (its messages may belong here), nor while an earlier one of the line is queued or retrying (being sent, or
# waiting for a retry), or held but being sent or due now (a hold that ended for both: the earlier goes first);
# one held for later does not count, and one that ended leaves the line. Waiting: flagged in the hash and due
# again at ARGV[3] (behind a message: woken when it ends) or ARGV[4] (behind a planning).
# KEYS: line, hash, unplanned, leases, ready. ARGV: id, its time if not in line, recheck, soon, ttl, the prefixes
# of events' and deliveries' keys, now. Returns {0, what it waits for, due} or {1, root, slack, mails}.
_TURN = """
local line, conv, id = KEYS[1], KEYS[2], ARGV[1]
local score = redis.call('ZSCORE', line, id)
if not score then score = ARGV[2]; redis.call('ZADD', line, score, id) end
score = tonumber(score)
redis.call('EXPIRE', line, ARGV[5])
local function wait(blocker, at)
  redis.call('HSET', conv, 'w:' .. id, 1)
  redis.call('EXPIRE', conv, ARGV[5])
  redis.call('ZADD', KEYS[5], at, id)
  return {0, blocker, at}
end
local function before(event)
  local key = ARGV[6] .. string.gsub(string.gsub(event, '%%', '%%25'), ':', '%%3A')
  local at = redis.call('HGET', key, 'receivedAt')
  return at and tonumber(at) < score
end
local unplanned = redis.call('ZRANGE', KEYS[3], 0, @LOOK@ - 1, 'WITHSCORES')
for i = 1, #unplanned, 2 do
  if tonumber(unplanned[i + 1]) < score or before(unplanned[i]) then return wait('e:' .. unplanned[i], ARGV[4]) end
end
for _, unit in ipairs(redis.call('HKEYS', KEYS[4])) do
  if string.sub(unit, 1, 2) == 'e:' and before(string.sub(unit, 3)) then return wait(unit, ARGV[4]) end
end
local rank = redis.call('ZRANK', line, id)
if rank > 0 then
  for _, other in ipairs(redis.call('ZRANGE', line, 0, rank - 1)) do
    local state, due = redis.call('HGET', ARGV[7] .. other, 's'), redis.call('ZSCORE', KEYS[5], other)
    local going = state == 'held' and (redis.call('HEXISTS', KEYS[4], 'd:' .. other) == 1 or
      (due and tonumber(due) <= tonumber(ARGV[8])))
    if state == 'queued' or state == 'retrying' or going then return wait('d:' .. other, ARGV[3]) end
    if state ~= 'held' then redis.call('ZREM', line, other) end
  end
end
redis.call('HDEL', conv, 'w:' .. id)
local got = redis.call('HMGET', conv, 'root', 'slack', 'mails')
return {1, got[1] or '', got[2] or '', got[3] or ''}
""".replace("@LOOK@", str(UNPLANNED_LOOKED_AT))

# ARGV[1] no longer holds the line back (it ended: ARGV[2] 1, it leaves; or it is held): the first message
# waiting its turn is due at ARGV[3]. KEYS: line, hash, ready. Returns 1 when one was woken.
_LEAVE = """
if ARGV[2] == '1' then redis.call('ZREM', KEYS[1], ARGV[1]) end
redis.call('HDEL', KEYS[2], 'w:' .. ARGV[1])
for _, other in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  if redis.call('HEXISTS', KEYS[2], 'w:' .. other) == 1 then
    redis.call('ZADD', KEYS[3], ARGV[3], other)
    return 1
  end
end
return 0
"""

# ARGV[1] went out: the first to go is the root (with Slack's channel:ts, ARGV[2]); an e-mail (ARGV[3] 1) joins
# the references, the first kept, then the latest. KEYS: hash. ARGV: id, slack, mail, ttl, most references.
_SENT = """
redis.call('HSETNX', KEYS[1], 'root', ARGV[1])
if ARGV[2] ~= '' then redis.call('HSETNX', KEYS[1], 'slack', ARGV[2]) end
if ARGV[3] == '1' then
  local mails, seen = {}, false
  for m in string.gmatch(redis.call('HGET', KEYS[1], 'mails') or '', '%S+') do
    mails[#mails + 1] = m
    seen = seen or m == ARGV[1]
  end
  if not seen then mails[#mails + 1] = ARGV[1] end
  if #mails > tonumber(ARGV[5]) then table.remove(mails, 2) end
  redis.call('HSET', KEYS[1], 'mails', table.concat(mails, ' '))
end
redis.call('EXPIRE', KEYS[1], ARGV[4])
return 1
"""


def conversation_key(cid: str) -> str:
    return f"{PREFIX}thread:{cid}"


def _line(cid: str) -> str:
    return conversation_key(cid) + ":line"


@dataclass(frozen=True)
class Waits:
    for_: str  # `d:<delivery id>`, `e:<event id>` (its planning) or `e:` (the notifications to plan)
    until: float


def _conversation(root: bytes | str, slack: bytes | str, mails: bytes | str) -> Conversation:
    return Conversation(_text(root) or None, _text(slack) or None, _text(mails).split())


class Threads:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis

    def join(self, lines: dict[str, list[str]], received: float, ttl: float) -> None:
        """A planning's messages take their places in their lines, by when their notification came."""
        pipe = self.redis.pipeline(transaction=False)
        for cid, ids in lines.items():
            pipe.zadd(_line(cid), dict.fromkeys(ids, received), nx=True)
            pipe.expire(_line(cid), int(ttl))
        pipe.execute()

    def turn(
        self, cid: str, ident: str, at: float, now: float, recheck: float, soon: float, ttl: float
    ) -> Conversation | Waits:
        keys = [_line(cid), conversation_key(cid), UNPLANNED, LEASES, READY]
        args: list[str | int] = [ident, repr(at), repr(recheck), repr(soon), int(ttl), event_key(""), delivery_key("")]
        args.append(repr(now))
        answer = self.redis.register_script(_TURN)(keys=keys, args=args)
        if int(answer[0]) == 0:
            return Waits(_text(answer[1]), float(_text(answer[2])))
        return _conversation(*answer[1:])

    def leave(self, cid: str, ident: str, ended: bool, now: float) -> bool:
        keys = [_line(cid), conversation_key(cid), READY]
        return bool(self.redis.register_script(_LEAVE)(keys=keys, args=[ident, int(ended), repr(now)]))

    def sent(self, cid: str, ident: str, slack: str | None, mail: bool, ttl: float) -> None:
        args: list[str | int] = [ident, slack or "", int(mail), int(ttl), MAX_REFERENCES]
        self.redis.register_script(_SENT)(keys=[conversation_key(cid)], args=args)

    def get(self, cid: str) -> Conversation | None:
        root, slack, mails = self.redis.hmget(conversation_key(cid), ["root", "slack", "mails"])
        return _conversation(root or "", slack or "", mails or "") if root else None
