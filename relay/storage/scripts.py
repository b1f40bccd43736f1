"""The Lua scripts that make each of the store's writes one atomic round trip (`relay.storage.store`)."""

# Slots of a channel's rate limit: each call books the next free one (a virtual schedule, GCRA-like),
# so a burst is spread over time in one round trip each, without waking everyone at once.
RESERVE_SLOT = """
local t = redis.call('TIME')
local now = tonumber(t[1]) + tonumber(t[2]) / 1000000
local interval = tonumber(ARGV[1])
local nxt = tonumber(redis.call('GET', KEYS[1]) or '0')
if nxt < now then nxt = now end
redis.call('SET', KEYS[1], tostring(nxt + interval), 'PX', math.ceil((nxt + interval - now) * 1000) + 1000)
return tostring(nxt - now)
"""

# Store deliveries' new states atomically in one command: each record, the failed index, the release of
# its send lock and of its lease (when this worker holds it) and the metrics.
# KEYS: failed index, metrics, leases, held index, then per record its key and its lock's key. ARGV:
# retention, lease owner, then per record: id, updatedAt, failed-index op (add/rem/-), release lock (1/0),
# release lease (1/0), held-index op (its notBefore to add, rem, or -), n, n field/value pairs, the counts
# of integer and of float increments, then those increments.
UPDATE = """
local i = 3
for r = 1, (#KEYS - 4) / 2 do
  local key, lock = KEYS[2 * r + 3], KEYS[2 * r + 4]
  local id, updated, failed, unlock, unlease = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  local held = ARGV[i + 5]
  local n = tonumber(ARGV[i + 6])
  redis.call('HSET', key, unpack(ARGV, i + 7, i + 6 + 2 * n))
  redis.call('EXPIRE', key, ARGV[1])
  if unlock == '1' then redis.call('DEL', lock) end
  if unlease == '1' and redis.call('HGET', KEYS[3], id) == ARGV[2] then redis.call('HDEL', KEYS[3], id) end
  if failed == 'add' then
    redis.call('ZADD', KEYS[1], updated, id)
  elseif failed == 'rem' then
    redis.call('ZREM', KEYS[1], id)
  end
  if held == 'rem' then
    redis.call('ZREM', KEYS[4], id)
  elseif held ~= '-' then
    redis.call('ZADD', KEYS[4], held, id)
  end
  i = i + 7 + 2 * n
  local ints, floats = tonumber(ARGV[i]), tonumber(ARGV[i + 1])
  i = i + 2
  for _ = 1, ints do
    redis.call('HINCRBY', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
  for _ = 1, floats do
    redis.call('HINCRBYFLOAT', KEYS[2], ARGV[i], ARGV[i + 1])
    i = i + 2
  end
end
return 1
"""

# Create delivery records that do not exist yet, atomically, and lease those the caller will send at once
# (taking the send lock of the new ones): one round trip for a whole notification. Returns per record 0
# (it existed: read it), 1 (created) or 2 (created, lock taken).
# KEYS: event's delivery list, deliveries index, failed index, metrics, leases, held index, then per record
# its key and its lock's key. ARGV: retention, owner, lock ttl, then per record: id, createdAt, failed
# (1/0), take (1/0), its metric field, its notBefore when held (else -), n, n field/value pairs.
CREATE = """
local out = {}
local a = 4
for r = 1, (#KEYS - 6) / 2 do
  local key, lock = KEYS[5 + 2 * r], KEYS[6 + 2 * r]
  local id, created, failed, take, metric = ARGV[a], ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local held = ARGV[a + 5]
  local n = tonumber(ARGV[a + 6])
  if take == '1' then redis.call('HSET', KEYS[5], id, ARGV[2]) end
  if redis.call('EXISTS', key) == 1 then
    out[r] = 0
  else
    redis.call('HSET', key, unpack(ARGV, a + 7, a + 6 + 2 * n))
    redis.call('EXPIRE', key, ARGV[1])
    redis.call('ZADD', KEYS[2], created, id)
    redis.call('RPUSH', KEYS[1], id)
    redis.call('HINCRBY', KEYS[4], metric, 1)
    if failed == '1' then redis.call('ZADD', KEYS[3], created, id) end
    if held ~= '-' then redis.call('ZADD', KEYS[6], held, id) end
    out[r] = 1
    if take == '1' and redis.call('SET', lock, ARGV[2], 'NX', 'EX', ARGV[3]) then out[r] = 2 end
  end
  a = a + 7 + 2 * n
end
redis.call('EXPIRE', KEYS[1], ARGV[1])
return out
"""

# Take a delivery's send lock and read the record, in one round trip: {1, fields} or {0}.
LOCK_AND_READ = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'EX', ARGV[2]) then
  return {1, redis.call('HGETALL', KEYS[2])}
end
return {0}
"""

# Gather a delivery into the open digest of its (route, channel, address), opening one when none is: the
# open digest's id lives at KEYS[1] for the window, so it closes by itself when the window ends (and
# early, when full). The item names its digest in its own record in the same step, so a delivery gathered
# once is never gathered again. Returns {digest id, items now, created (1/0), full (1/0), its notBefore}.
# KEYS: open-digest key, the item's record, deliveries index, held index, metrics, the item's event's
# delivery list, the new digest's record. ARGV: new digest id, window (ms), max items, item id, retention,
# createdAt, the new digest's metric field, its notBefore, record key prefix, n, n field/value pairs.
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

# One round trip per notification: dedup, the event record, its index and counter, and its entry among the
# unplanned events (`relay.storage.planning`), in one atomic script: it runs whole or not at all on the
# server, and the append-only file records its writes together, so a 202 means durable and nothing is ever
# half-accepted. The only command that can refuse is the first one (SET NX), before anything is written.
# When no planning job is pending, the script sets the pending flag to a new job's id and returns it: the
# caller then enqueues that job through RQ's own `Queue.enqueue_call`. Were that enqueue lost (the caller
# died between the two), the event still waits among the unplanned ones, and the heartbeat's sweep queues a
# job for it once the flag has expired.
# KEYS: 1 dedup, 2 event hash, 3 events index, 4 metrics, 5 unplanned events, 6 pending planning job flag
# ARGV: 1 dedup ttl, 2 eventId, 3 kind, 4 receivedAt, 5 payload, 6 retention, 7 received counter field,
#       8 duplicate counter field, 9 the planning job's id, 10 the flag's lifetime (s)
# Returns 0 (duplicate), 1 (accepted, a planning job pending) or the job id ARGV[9] (accepted: enqueue it).
ACCEPT = """
if not redis.call('SET', KEYS[1], '1', 'NX', 'EX', ARGV[1]) then
  redis.call('HINCRBY', KEYS[4], ARGV[8], 1)
  return 0
end
redis.call('HSET', KEYS[2], 'eventId', ARGV[2], 'kind', ARGV[3], 'receivedAt', ARGV[4], 'payload', ARGV[5])
redis.call('EXPIRE', KEYS[2], ARGV[6])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[2])
redis.call('HINCRBY', KEYS[4], ARGV[7], 1)
redis.call('ZADD', KEYS[5], ARGV[4], ARGV[2])
if redis.call('SET', KEYS[6], ARGV[9], 'NX', 'EX', ARGV[10]) then
  return ARGV[9]
end
return 1
"""
