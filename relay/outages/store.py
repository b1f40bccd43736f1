"""Each channel's health in Redis, shared by every worker (the rules: `relay.outages.model`); every change is one
script, so that workers never see the state diverge. Keys: `relay:channel:<name>` (hash: state, fails, since,
lastError, lastSuccessAt, probeAt, probes, okW, failW, wAt), `relay:channel:<name>:waiting` (zset delivery id ->
createdAt, oldest first), `relay:channel:<name>:m:<minute>` (hash: sends delivered `d`, failed `f`, durations per
bucket `b<i>`; gone after an hour and a bit), `relay:channels` (the channels that ever sent, for the gauge). Times
are relay's one clock (`relay.core.clock`), handed to each script as `clock`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis import Redis

from relay.outages.model import MAX_PROBE, OK, SHARE_HALF_LIFE, p95, probe_schedule
from relay.storage.activity import HOUR_MINUTES
from relay.storage.leases import READY
from relay.storage.records import LATENCY_BUCKETS, PREFIX, _text

CHANNELS = PREFIX + "channels"
MINUTE_TTL = 3900  # seconds: a minute's sends are read for an hour

# Hold a delivery for its down channel: due at the next probe when it is the oldest waiting, else MAX_PROBE later
# (should the probe's worker die, a waiting one probes then). KEYS: channel, waiting, ready.
_HOLD = """
local function num(x) return string.format('%.17g', x) end  -- exact: tostring keeps 14 digits
local function hold(id, created, probe_at, max)
  redis.call('ZADD', KEYS[2], created, id)
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  redis.call('ZADD', KEYS[3], num(probe_at), oldest)
  if oldest == id then return probe_at end
  redis.call('ZADD', KEYS[3], num(probe_at + max), id)
  return probe_at + max
end
local function step(first)
  local probes = tonumber(redis.call('HGET', KEYS[1], 'probes') or '0')
  return tonumber(ARGV[first + math.min(probes + 1, #ARGV - first)])
end
"""

# Before a send: 'up', 'probe' (the channel is down and this delivery is its probe: the next one is not
# before the next step of the schedule, and the oldest waiting is due then), or 'down' (held, as
# `_HOLD`). KEYS: channel, waiting, ready. ARGV: clock, delivery id, createdAt, MAX_PROBE, the probe
# schedule...
_GATE = (
    _HOLD
    + """
if redis.call('HGET', KEYS[1], 'state') ~= 'down' then return {'up'} end
local clock = tonumber(ARGV[1])
local probe_at = tonumber(redis.call('HGET', KEYS[1], 'probeAt') or '0')
if clock >= probe_at then
  local next_at = clock + step(4)
  redis.call('HSET', KEYS[1], 'probeAt', num(next_at))
  redis.call('ZREM', KEYS[2], ARGV[2])
  -- should this probe end with no outcome (skipped, its worker dead), the oldest waiting probes next
  local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
  if oldest then redis.call('ZADD', KEYS[3], num(next_at), oldest) end
  return {'probe'}
end
local due = hold(ARGV[2], ARGV[3], probe_at, tonumber(ARGV[4]))
local h = redis.call('HMGET', KEYS[1], 'since', 'lastError')
return {'down', h[1] or '', h[2] or '', num(due)}
"""
)

# After a send: count it (a minute's stats) and apply its outcome. A success: no failures in a row, and a
# down channel is up, its waiting deliveries due again at their createdAt (so oldest first, before newer
# work; with a rate, ARGV[12] 1, the caller makes them due at their slots): 'resumed', their ids oldest first.
# A transient failure: one more in a row; at `after`, and with failures at least as many as successes among the
# recent sends (`okW`, `failW`: counts that halve every SHARE_HALF_LIFE, as of `wAt`), the channel is down; a
# failed probe waits the next step; a delivery that fails while the channel is down is held: 'down' (as `_GATE`).
# A permanent failure counts for nothing (a down channel's next probe is its oldest waiting).
# KEYS: channel, waiting, ready, minute, channels. ARGV: clock, outcome, error, after, enabled, probe,
# delivery id, createdAt, MAX_PROBE, duration bucket field, channel name, rated, the probe schedule...
_NOTE = (
    _HOLD
    + """
local clock, kind, max, id = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[9]), ARGV[7]
if kind == 'ok' then redis.call('HINCRBY', KEYS[4], 'd', 1) else redis.call('HINCRBY', KEYS[4], 'f', 1) end
if ARGV[10] ~= '' then redis.call('HINCRBY', KEYS[4], ARGV[10], 1) end
redis.call('EXPIRE', KEYS[4], @TTL@)
redis.call('SADD', KEYS[5], ARGV[11])
local state = redis.call('HGET', KEYS[1], 'state')
local w = redis.call('HMGET', KEYS[1], 'okW', 'failW', 'wAt')
-- `wAt` never moves back (a worker whose clock is a little behind decays nothing, and no gap decays twice), but
-- one more than a minute ahead is a clock gone wrong: this one's time is taken
local last = tonumber(w[3]) or clock
local at = (last > clock + 60) and clock or math.max(last, clock)
local decay = 2 ^ (math.min(0, last - at) / @HALF@)
local ok_w, fail_w = (tonumber(w[1]) or 0) * decay, (tonumber(w[2]) or 0) * decay
if kind == 'ok' then ok_w = ok_w + 1 elseif kind == 'transient' then fail_w = fail_w + 1 end
redis.call('HSET', KEYS[1], 'okW', num(ok_w), 'failW', num(fail_w), 'wAt', num(at))
if kind == 'ok' then
  redis.call('HSET', KEYS[1], 'fails', 0, 'lastSuccessAt', ARGV[1])
  redis.call('ZREM', KEYS[2], id)
  if state ~= 'down' then return {'up'} end
  redis.call('HSET', KEYS[1], 'state', 'up')
  redis.call('HDEL', KEYS[1], 'since', 'probeAt', 'probes')
  local waiting, ids = redis.call('ZRANGE', KEYS[2], 0, -1, 'WITHSCORES'), {}
  for i = 1, #waiting, 2 do
    if ARGV[12] ~= '1' then redis.call('ZADD', KEYS[3], waiting[i + 1], waiting[i]) end
    ids[#ids + 1] = waiting[i]
  end
  redis.call('DEL', KEYS[2])
  return {'resumed', ids}
end
redis.call('HSET', KEYS[1], 'lastError', ARGV[3])
if kind ~= 'transient' then
  if state == 'down' then
    redis.call('ZREM', KEYS[2], id)
    local oldest = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    local probe_at = tonumber(redis.call('HGET', KEYS[1], 'probeAt') or ARGV[1])
    if ARGV[6] == '1' and oldest then redis.call('ZADD', KEYS[3], num(probe_at), oldest) end
  end
  return {'up'}
end
local fails = redis.call('HINCRBY', KEYS[1], 'fails', 1)
if ARGV[5] ~= '1' then return {'up'} end
if state ~= 'down' then
  if fails < tonumber(ARGV[4]) or fail_w < ok_w then return {'up'} end
  redis.call('HSET', KEYS[1], 'state', 'down', 'since', ARGV[1], 'probes', 0)
  redis.call('HSET', KEYS[1], 'probeAt', num(clock + step(12)))
elseif ARGV[6] == '1' then
  redis.call('HINCRBY', KEYS[1], 'probes', 1)
  redis.call('HSET', KEYS[1], 'probeAt', num(clock + step(12)))
end
local probe_at = tonumber(redis.call('HGET', KEYS[1], 'probeAt'))
local due = hold(id, ARGV[8], probe_at, max)
return {'down', redis.call('HGET', KEYS[1], 'since'), ARGV[3], num(due)}
""".replace("@TTL@", str(MINUTE_TTL)).replace("@HALF@", repr(SHARE_HALF_LIFE))
)


@dataclass(frozen=True)
class Gate:
    """`up`, `probe`, `down` (held until `due`) or `resumed` (the waiting deliveries due now, oldest first)."""

    state: str
    since: float = 0.0
    last_error: str = ""
    due: float = 0.0
    resumed: tuple[str, ...] = ()


@dataclass(frozen=True)
class ChannelHealth:
    name: str
    down: bool
    since: float | None
    last_error: str | None
    last_success_at: float | None
    delivered_last_hour: int
    failed_last_hour: int
    p95_send_seconds: float | None


def channel_key(name: str) -> str:
    return f"{PREFIX}channel:{name}"


def _keys(name: str) -> list[str]:
    return [channel_key(name), channel_key(name) + ":waiting", READY]


def _minute_key(name: str, minute: int) -> str:
    return f"{channel_key(name)}:m:{minute}"


def _bucket(seconds: float) -> str:
    return f"b{next((i for i, b in enumerate(LATENCY_BUCKETS) if seconds <= b), len(LATENCY_BUCKETS))}"


def _gate(answer: Sequence[Any]) -> Gate:
    state = _text(answer[0])
    if state == "resumed":
        return Gate(state, resumed=tuple(_text(i) for i in answer[1]))
    if state != "down":
        return Gate(state)
    since, error, due = (_text(a) for a in answer[1:4])
    return Gate(state, float(since or 0), error, float(due))


class ChannelStates:
    def __init__(self, redis: Redis) -> None:
        self.redis = redis
        self._gate = redis.register_script(_GATE)
        self._note = redis.register_script(_NOTE)

    def gate(self, name: str, delivery_id: str, created_at: float, probe: float, clock: float) -> Gate:
        """Before a send to `name`: go (`up`), go as the probe, or wait (`down`: held, due as it says)."""
        args: list[Any] = [repr(clock), delivery_id, repr(created_at), MAX_PROBE]
        return _gate(self._gate(keys=_keys(name), args=[*args, *probe_schedule(probe)]))

    def note(
        self,
        name: str,
        kind: str,
        error: str,
        delivery_id: str,
        created_at: float,
        clock: float,
        took: float | None = None,
        after: int = 0,
        probe: float | None = None,
        probing: bool = False,
        rated: bool = False,
    ) -> Gate:
        """`probe` None: the channel's outage rule is off (its failures are counted, it is never down); `rated`:
        the channel has a rate, and what waited is made due by the caller, at its slots."""
        keys = [*_keys(name), _minute_key(name, int(clock // 60)), CHANNELS]
        args: list[Any] = [repr(clock), kind, error if kind != OK else "", after, int(probe is not None), int(probing)]
        args += [delivery_id, repr(created_at), MAX_PROBE, _bucket(took) if took is not None else ""]
        args += [name, int(rated), *probe_schedule(probe if probe is not None else MAX_PROBE)]
        return _gate(self._note(keys=keys, args=args))

    def health(self, names: Sequence[str], clock: float) -> list[ChannelHealth]:
        """Each channel's state and its sends of the last hour (`clock`'s minute and the 59 before)."""
        minute = int(clock // 60)
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hgetall(channel_key(name))
            for m in range(minute - HOUR_MINUTES + 1, minute + 1):
                pipe.hgetall(_minute_key(name, m))
        answers = pipe.execute()
        out = []
        per = HOUR_MINUTES + 1
        for i, name in enumerate(names):
            state = {_text(k): _text(v) for k, v in answers[i * per].items()}
            totals: dict[str, int] = {}
            for stats in answers[i * per + 1 : (i + 1) * per]:
                for k, v in stats.items():
                    totals[_text(k)] = totals.get(_text(k), 0) + int(v)
            buckets = [totals.get(f"b{j}", 0) for j in range(len(LATENCY_BUCKETS) + 1)]
            down = state.get("state") == "down"
            out.append(
                ChannelHealth(
                    name=name,
                    down=down,
                    since=float(state["since"]) if down and state.get("since") else None,
                    last_error=state.get("lastError") or None,
                    last_success_at=float(state["lastSuccessAt"]) if state.get("lastSuccessAt") else None,
                    delivered_last_hour=totals.get("d", 0),
                    failed_last_hour=totals.get("f", 0),
                    p95_send_seconds=p95(LATENCY_BUCKETS, buckets),
                )
            )
        return out

    def up(self) -> dict[str, float]:
        """Each channel that ever sent: 1 up, 0 down (the gauge `relay_channel_up`)."""
        names = sorted(_text(n) for n in self.redis.smembers(CHANNELS))
        pipe = self.redis.pipeline(transaction=False)
        for name in names:
            pipe.hget(channel_key(name), "state")
        return {n: 0.0 if s == b"down" else 1.0 for n, s in zip(names, pipe.execute(), strict=True)}
