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

# A key kept at least ARGV[1] seconds from now (a longer TTL it has stays): a waiting delivery's notification is
# kept as long as it (`Store.update_many`). KEYS: the key.
KEEP_LONGER = """
local ttl = redis.call('TTL', KEYS[1])
if ttl >= 0 and ttl < tonumber(ARGV[1]) then redis.call('EXPIRE', KEYS[1], ARGV[1]) end
return ttl
"""

# What of deliveries' new states needs a script (in `Store.update_many`'s transaction): each moves to the list of
# its state; its lease is dropped when this worker holds it, with its lost tries (an outcome stored by the lease
# holder ends them: they count in a row); the metrics are counted (HINCRBYFLOAT keeps an integer's text).
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

# Add ids (a Lua table) to the event record at `key` (`relay.storage.records.EventRecord`): the first ids in its
# field `deliveries`, each later call's in a field of its own (`deliveries.<n>`, n counted in `parts`), so that an
# addition costs its own ids whatever the event has (a fan-out gathered into thousands of digests adds one id at a
# time). A gone event gets no record of these fields alone (nor a key without a TTL).
ADD_IDS_LUA = """
local function add_ids(key, ids)
  if #ids == 0 or redis.call('EXISTS', key) == 0 then return end
  local field = 'deliveries'
  if redis.call('HEXISTS', key, field) == 1 then field = field .. '.' .. redis.call('HINCRBY', key, 'parts', 1) end
  redis.call('HSET', key, field, table.concat(ids, ' '))
end
"""

# A chunk of a notification's planning in one round trip: the records that do not exist yet (each into the list
# of its state), their ids added to the event's, a lease on those the caller sends at once (new ones only: one
# that existed is another planner's, or due), the other open ones made due (one that exists keeps its due time),
# and with the last chunk the caller's lease on the notification dropped. Returns per record 0 (it existed: read
# it) or 1 (created), plus 2 when the lease was taken.
# KEYS: the event's record, lists registry, failed index, metrics, leases, held index, due deliveries, losses,
# then each record's key. ARGV: retention, owner, the notification's unit ('' for none: not the last chunk),
# then per record: id, createdAt, failed (1/0), take (1/0), its metric field, its notBefore when held (else -),
# when it is due when not taken (else -), its list's key, n, n field/value pairs.
CREATE = (
    ADD_IDS_LUA
    + """
local out, made_ids, a = {}, {}, 4
for r = 9, #KEYS do
  local id, created, failed, take, metric = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local held, due, list = ARGV[a + 5], ARGV[a + 6], ARGV[a + 7]
  local n = tonumber(ARGV[a + 8])
  local made = 0
  if redis.call('EXISTS', KEYS[r]) == 0 then
    redis.call('HSET', KEYS[r], unpack(ARGV, a + 9, a + 8 + 2 * n))
    redis.call('EXPIRE', KEYS[r], ARGV[1])
    redis.call('ZADD', list, created, id)
    redis.call('SADD', KEYS[2], list)
    made_ids[#made_ids + 1] = id
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
add_ids(KEYS[1], made_ids)
if ARGV[3] ~= '' and redis.call('HGET', KEYS[5], ARGV[3]) == ARGV[2] then
  redis.call('HDEL', KEYS[5], ARGV[3])
  redis.call('HDEL', KEYS[8], ARGV[3])
end
return out
"""
)

# Gather a delivery into the open digest of its (route, channel, address), opening one when none is: the
# open digest's id and the end of its window (relay's clock) live at KEYS[1] ("<id> <end>"), so it is closed
# to new items once relay's clock reaches the end (and early, when full); the key's own TTL only cleans up.
# The item names its digest in its own record in the same step, so a delivery gathered once is never
# gathered again. Returns {digest id, items now, created (1/0), full (1/0), its notBefore}.
# KEYS: open-digest key, the item's record, the new digest's list (`relay.storage.lists`), held index, metrics,
# the record of the item's event (the new digest's id is added to its ids), the new digest's record, the lists
# registry. ARGV: new digest id, the open key's TTL (ms: cleanup), max items, item id, retention, createdAt (now),
# the new digest's metric field, its notBefore (the window's end), record key prefix, n, n field/value pairs.
GATHER = (
    ADD_IDS_LUA
    + """
local had = redis.call('HGET', KEYS[2], 'digest')
if had then
  return {had, 0, 0, 0, redis.call('HGET', ARGV[9] .. had, 'notBefore') or ''}
end
local open = redis.call('GET', KEYS[1])
local d, ends = nil, nil
if open then d, ends = string.match(open, '^(%S+) (%S+)$') end
if d and tonumber(ends) <= tonumber(ARGV[6]) then d = nil end
local created = 0
if not d then
  d = ARGV[1]
  local n = tonumber(ARGV[10])
  redis.call('SET', KEYS[1], d .. ' ' .. ARGV[8], 'PX', ARGV[2])
  redis.call('HSET', KEYS[7], unpack(ARGV, 11, 10 + 2 * n))
  redis.call('EXPIRE', KEYS[7], ARGV[5])
  redis.call('ZADD', KEYS[3], ARGV[6], d)
  redis.call('SADD', KEYS[8], KEYS[3])
  redis.call('ZADD', KEYS[4], ARGV[8], d)
  add_ids(KEYS[6], {d})
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
  if string.match(redis.call('GET', KEYS[1]) or '', '^%S+') == d then redis.call('DEL', KEYS[1]) end
  full = 1
end
return {d, #items, created, full, redis.call('HGET', key, 'notBefore') or ''}
"""
)

# Close a digest to new items (when it is sent or released) and read what it carries: after this, nothing
# joins it. KEYS: open-digest key, the digest's record. ARGV: the digest's id.
CLOSE_DIGEST = """
if string.match(redis.call('GET', KEYS[1]) or '', '^%S+') == ARGV[1] then redis.call('DEL', KEYS[1]) end
return redis.call('HGET', KEYS[2], 'items') or '[]'
"""

# One round trip per notification: dedup, the event record, its entry in the list of those received, its
# counter, and its place among the notifications to plan (`relay.storage.leases`), in one atomic script: it
# runs whole or not at all on the server, and the append-only file records its writes together, so a 202
# means durable and nothing is ever half-accepted. A script that fails part way keeps what it wrote before
# (Redis has no rollback), so every key is checked first: one holding another type of value (written by hand)
# fails the accept before anything is written, and the platform's retry is not taken for a duplicate.
# The event record is the dedup: one of this eventId received after ARGV[1] makes a duplicate, nothing written
# (its TTL, ARGV[5], outlasts the window). A record written anew (after the window) keeps its deliveries' ids
# and drops the trace of the last intake.
# When no wake-up job is queued, the flag is set to a new job's id, returned for the caller to enqueue through
# RQ; were that lost, the notification still waits unplanned, and the heartbeat's sweep wakes a worker for it.
# The stream of notifications received (KEYS[2], the console's list) takes an entry {eventId} with the ID
# `<receivedAt in ms>-0`; when an entry has an ID at or above it (two in one ms, replicas' clocks apart, a clock
# moved back), it takes the last ID's ms with its sequence + 1 (Redis 6.2 has no `<ms>-*`): the last ID given,
# which outlives its entry's trimming.
# KEYS: 1 event record, 2 stream of notifications received, 3 metrics, 4 unplanned events, 5 wake-up flag
# ARGV: 1 the dedup window's start (receivedAt - dedup_ttl), 2 eventId, 3 receivedAt, 4 payload, 5 the
#       record's TTL, 6 received counter field, 7 duplicate counter field, 8 the wake-up job's id, 9 the flag's
#       lifetime (s), 10 receivedAt in ms, then with tracing on: 'trace' and the W3C traceparent of the intake
# Returns 0 (duplicate), 1 (accepted, a wake-up queued already) or the job id ARGV[8]
# (accepted: enqueue it); an error, with nothing written, when a key holds another type of value.
ACCEPT = """
for i, want in ipairs({'hash', 'stream', 'hash', 'zset', 'string'}) do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= want then
    return redis.error_reply('WRONGTYPE ' .. KEYS[i] .. ' holds a ' .. found .. ': nothing accepted')
  end
end
local at = redis.call('HGET', KEYS[1], 'receivedAt')
local dup = at and tonumber(at) > tonumber(ARGV[1])
redis.call('HINCRBY', KEYS[3], dup and ARGV[7] or ARGV[6], 1)
if dup then return 0 end
redis.call('HDEL', KEYS[1], 'trace')
redis.call('HSET', KEYS[1], 'receivedAt', ARGV[3], 'payload', ARGV[4], unpack(ARGV, 11))
redis.call('EXPIRE', KEYS[1], ARGV[5])
if redis.pcall('XADD', KEYS[2], ARGV[10] .. '-0', 'eventId', ARGV[2])['err'] then
  local info = redis.call('XINFO', 'STREAM', KEYS[2])
  for i = 1, #info, 2 do
    if info[i] == 'last-generated-id' then
      local ms, seq = string.match(info[i + 1], '^(%d+)-(%d+)$')
      redis.call('XADD', KEYS[2], ms .. '-' .. string.format('%d', tonumber(seq) + 1), 'eventId', ARGV[2])
    end
  end
end
redis.call('ZADD', KEYS[4], ARGV[3], ARGV[2])
return redis.call('SET', KEYS[5], ARGV[8], 'NX', 'EX', ARGV[9]) and ARGV[8] or 1
"""
