"""The Lua scripts that make each of the store's writes one atomic round trip (`relay.storage.store`)."""

from relay.core.states import State
from relay.storage.lists import LIST_PREFIX, LISTS

# Slots of a channel's rate limit: each call books the next free one (a virtual schedule, GCRA-like),
# so a burst is spread over time in one round trip each, without waking everyone at once.
# KEYS: the channel's next free slot. ARGV: the interval between sends, now (relay's clock, `relay.core.clock`).
RESERVE_SLOT = """
local interval, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local nxt = math.max(now, tonumber(redis.call('GET', KEYS[1]) or '0'))
redis.call('SET', KEYS[1], tostring(nxt + interval), 'PX', math.ceil((nxt + interval - now) * 1000) + 1000)
return tostring(nxt - now)
"""

# What of deliveries' new states needs a script (`Store.update_many` runs it in the transaction that stores the
# records, the failed and held indexes and the activity): each moves to the list of its state (out of its other
# states' lists, `relay.storage.lists`), scored by createdAt; its lease is dropped when this worker holds it,
# with the count of its lost tries (an outcome stored by the lease holder ends them: they count in a row); and
# the metrics are counted (HINCRBYFLOAT: an integer's count stays an integer's text).
# KEYS: leases, losses, metrics. ARGV: lease owner, r, then per record (r of them): id, createdAt, its state, its
# `list_rest`, drop its lease (1/0); then the metrics' field/increment pairs.
UPDATE = f"""
local STATES = {{{", ".join(repr(s.value) for s in State)}}}
local last = 2 + 5 * tonumber(ARGV[2])
for i = 3, last, 5 do
  local id, rest, unit = ARGV[i], ARGV[i + 3], 'd:' .. ARGV[i]
  for _, s in ipairs(STATES) do redis.call('ZREM', '{LIST_PREFIX}' .. s .. rest, id) end
  redis.call('ZADD', '{LIST_PREFIX}' .. ARGV[i + 2] .. rest, ARGV[i + 1], id)
  redis.call('SADD', '{LISTS}', '{LIST_PREFIX}' .. ARGV[i + 2] .. rest)
  if ARGV[i + 4] == '1' and redis.call('HGET', KEYS[1], unit) == ARGV[1] then
    redis.call('HDEL', KEYS[1], unit)
    redis.call('HDEL', KEYS[2], unit)
  end
end
for j = last + 1, #ARGV, 2 do redis.call('HINCRBYFLOAT', KEYS[3], ARGV[j], ARGV[j + 1]) end
return 1
"""

# A chunk of a notification's planning stored in one round trip (`Store.create_deliveries` cuts a planning into
# chunks of bounded size: a Redis command takes at most 1,048,576 arguments): the delivery records that do
# not exist yet, a lease on those the caller sends at once (new ones only: one that existed is another
# planner's, or due), the others that are open put among the due deliveries (`relay.storage.leases`: now, or a
# held one at its notBefore; one that exists keeps a due time it has), and, with the last chunk, the
# notification done with: the caller's lease on it dropped. Returns per record 0 (it existed: read it) or 1
# (created), plus 2 when the lease was taken.
# A hash at the delivery list's key is an event an earlier relay stored under the raw id `<this id>:deliveries`
# (`relay.storage.records.key_part`): it is moved to its own key first. Any other type there (or that event's
# own key taken already): an error, and nothing is written.
# A new record goes into the list of its state (`relay.storage.lists`, a key named by the caller), scored by
# createdAt.
# KEYS: event's delivery list, lists registry, failed index, metrics, leases, held index, due deliveries,
# losses, where a squatting event goes, then each record's key. ARGV: retention, owner, the notification's unit
# ('' for none: not the last chunk), then per record: id, createdAt, failed (1/0), take (1/0), its metric
# field, its notBefore when held (else -), when it is due when not taken (else -), its list's key, n, n
# field/value pairs.
CREATE = """
local listed = redis.call('TYPE', KEYS[1])['ok']
if listed == 'hash' and redis.call('EXISTS', KEYS[9]) == 0 then
  redis.call('RENAME', KEYS[1], KEYS[9])
elseif listed ~= 'list' and listed ~= 'none' then
  return redis.error_reply('WRONGTYPE ' .. KEYS[1] .. ' holds a ' .. listed .. ', not a delivery list: nothing planned')
end
local out = {}
local a = 4
for r = 10, #KEYS do
  local key = KEYS[r]
  local id, created, failed, take, metric = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local held, due, list = ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
  local n = tonumber(ARGV[a + 8])
  local made = 0
  if redis.call('EXISTS', key) == 0 then
    redis.call('HSET', key, unpack(ARGV, a + 9, a + 8 + 2 * n))
    redis.call('EXPIRE', key, ARGV[1])
    redis.call('ZADD', list, created, id)
    redis.call('SADD', KEYS[2], list)
    redis.call('RPUSH', KEYS[1], id)
    redis.call('HINCRBY', KEYS[4], metric, 1)
    if failed == '1' then redis.call('ZADD', KEYS[3], created, id) end
    if held ~= '-' then redis.call('ZADD', KEYS[6], held, id) end
    made = 1
  end
  local got = 0
  if take == '1' and made == 1 then
    redis.call('HSET', KEYS[5], 'd:' .. id, ARGV[2])
    got = 2
  end
  if got == 0 and due ~= '-' then
    if made == 1 then redis.call('ZADD', KEYS[7], due, id) else redis.call('ZADD', KEYS[7], 'NX', due, id) end
  end
  out[#out + 1] = made + got
  a = a + 9 + 2 * n
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
if ARGV[3] ~= '' and redis.call('HGET', KEYS[5], ARGV[3]) == ARGV[2] then
  redis.call('HDEL', KEYS[5], ARGV[3])
  redis.call('HDEL', KEYS[8], ARGV[3])
end
return out
"""

# Gather a delivery into the open digest of its (route, channel, address), opening one when none is: the
# open digest's id lives at KEYS[1] for the window, so it closes by itself when the window ends (and
# early, when full). The item names its digest in its own record in the same step, so a delivery gathered
# once is never gathered again. Returns {digest id, items now, created (1/0), full (1/0), its notBefore}.
# KEYS: open-digest key, the item's record, the new digest's list (`relay.storage.lists`), held index, metrics,
# the item's event's delivery list, the new digest's record, the lists registry. ARGV: new digest id, window
# (ms), max items, item id, retention, createdAt, the new digest's metric field, its notBefore, record key
# prefix, n, n field/value pairs.
GATHER = """
local had = redis.call('HGET', KEYS[2], 'digest')
if had then
  return {had, 0, 0, 0, redis.call('HGET', ARGV[9] .. had, 'notBefore') or ''}
end
local d = redis.call('GET', KEYS[1])
local created = 0
if not d then
  d = ARGV[1]
  local n = tonumber(ARGV[10])
  redis.call('SET', KEYS[1], d, 'PX', ARGV[2])
  redis.call('HSET', KEYS[7], unpack(ARGV, 11, 10 + 2 * n))
  redis.call('EXPIRE', KEYS[7], ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[6], d)
  redis.call('SADD', KEYS[8], KEYS[3])
  redis.call('ZADD', KEYS[4], ARGV[8], d)
  redis.call('RPUSH', KEYS[6], d)
  redis.call('EXPIRE', KEYS[6], ARGV[5])
  redis.call('HINCRBY', KEYS[5], ARGV[7], 1)
  created = 1
end
local key = ARGV[9] .. d
local items = cjson.decode(redis.call('HGET', key, 'items') or '[]')
items[#items + 1] = ARGV[4]
redis.call('HSET', key, 'items', cjson.encode(items))
redis.call('HSET', KEYS[2], 'digest', d)
local full = 0
if #items >= tonumber(ARGV[3]) then
  if redis.call('GET', KEYS[1]) == d then redis.call('DEL', KEYS[1]) end
  full = 1
end
return {d, #items, created, full, redis.call('HGET', key, 'notBefore') or ''}
"""

# Close a digest to new items (when it is sent or released) and read what it carries: after this, nothing
# joins it. KEYS: open-digest key, the digest's record. ARGV: the digest's id.
CLOSE_DIGEST = """
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('HGET', KEYS[2], 'items') or '[]'
"""

# One round trip per notification: dedup, the event record, its index and counter, and its place among the
# notifications to plan (`relay.storage.leases`), in one atomic script: it runs whole or not at all on the
# server, and the append-only file records its writes together, so a 202 means durable and nothing is ever
# half-accepted. A script that fails part way keeps what it wrote before (Redis has no rollback), so every key
# is checked first: one holding another type of value (written by hand, or by an earlier relay's layout) fails
# the accept before anything is written, and the platform's retry is not taken for a duplicate. Only then
# can the dedup (SET NX) refuse, still before anything is written; an earlier relay's dedup key of the same
# eventId (KEYS[7], `relay.storage.records.legacy_keys`; KEYS[1] again when it has none) counts as one. Dedup
# keys hold 2 (an earlier relay's hold 1): today's key of `a:b` is where an earlier relay kept `a%3Ab`'s.
# When no wake-up job is queued, the script sets the wake-up flag to a new job's id and returns it: the
# caller then enqueues that job through RQ's own `Queue.enqueue_call`. Were that enqueue lost (the caller
# died between the two), the notification still waits among the unplanned ones, and the heartbeat's sweep
# wakes a worker for it.
# KEYS: 1 dedup, 2 event hash, 3 events index, 4 metrics, 5 unplanned events, 6 wake-up flag,
#       7 the earlier relay's dedup key
# ARGV: 1 dedup ttl, 2 eventId, 3 kind, 4 receivedAt, 5 payload, 6 retention, 7 received counter field,
#       8 duplicate counter field, 9 the wake-up job's id, 10 the flag's lifetime (s), 11 trace context
#       (a W3C traceparent, "" with tracing off)
# Returns 0 (duplicate), 1 (accepted, a wake-up queued already) or the job id ARGV[9]
# (accepted: enqueue it); an error, with nothing written, when a key holds another type of value.
ACCEPT = """
local wanted = {'string', 'hash', 'zset', 'hash', 'zset', 'string', 'string'}
for i, want in ipairs(wanted) do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= want then
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. found .. ': nothing accepted')
  end
end
if redis.call('GET', KEYS[7]) == '1' or not redis.call('SET', KEYS[1], '2', 'NX', 'EX', ARGV[1]) then
  redis.call('HINCRBY', KEYS[4], ARGV[8], 1)
  return 0
end
redis.call('HSET', KEYS[2], 'eventId', ARGV[2], 'kind', ARGV[3], 'receivedAt', ARGV[4], 'payload', ARGV[5],
  'trace', ARGV[11])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('HINCRBY', KEYS[4], ARGV[7], 1)
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[2])
if redis.call('SET', KEYS[6], ARGV[9], 'NX', 'EX', ARGV[10]) then
  return ARGV[9]
end
return 1
"""
