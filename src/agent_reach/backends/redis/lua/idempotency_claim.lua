-- Decide who executes a key, in one step (see `IdempotencyStore.claim`).
-- The record is a hash: fingerprint, fence, lease_until (ms on Redis's own clock),
-- sent_to (the agent ids it was delivered to, one per line), owner (the claim call's token),
-- node (the claiming coordinator), and status and body once completed. Leases are compared with Redis TIME, never a
-- caller's clock. The client re-sends a script whose answer a dropped connection lost;
-- a claim that finds its own token in progress made that record: it is claimed, again.
-- KEYS: record, the fence counter of the record's shard
-- ARGV: fingerprint, lease ms, key ttl ms of an in-progress record (well past the lease),
--       number of shards, this record's shard, the claim call's token, this coordinator's
--       node id, a dead node whose claims are taken over whatever their lease ('' for none)
-- A fence is counter * shards + shard: rising for each key, and never the same for two keys.
-- Returns {state, fence[, status, body]}; a claim returns {'claimed', fence, sent_to};
-- in_progress returns {'in_progress', fence, node}.
local record = redis.call('HMGET', KEYS[1], 'fingerprint', 'fence', 'lease_until', 'status', 'body',
  'sent_to', 'owner', 'node')
local time = redis.call('TIME')
local now_ms = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
if record[1] then
  if record[1] ~= ARGV[1] then
    return {'mismatch', 0}
  end
  if record[5] then
    return {'completed', tonumber(record[2]), tonumber(record[4]), record[5]}
  end
  local dead_holder = ARGV[8] ~= '' and record[8] == ARGV[8]
  if tonumber(record[3]) > now_ms and not dead_holder then
    if record[7] == ARGV[6] then
      return {'claimed', tonumber(record[2]), record[6] or ''}
    end
    return {'in_progress', tonumber(record[2]), record[8] or ''}
  end
end
-- No record, or its owner's lease (or liveness) ran out: a new owner with a higher fence, which keeps
-- the instances the old owner had delivered to.
local sent_to = record[6] or ''
local fence = redis.call('INCR', KEYS[2]) * tonumber(ARGV[4]) + tonumber(ARGV[5])
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[1], 'fingerprint', ARGV[1], 'fence', fence,
  'lease_until', now_ms + tonumber(ARGV[2]), 'sent_to', sent_to, 'owner', ARGV[6], 'node', ARGV[7])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {'claimed', fence, sent_to}
