-- Extend a live lease by the ttl it holds; nil, changing nothing, when the lease is gone.
-- A lease in its last millisecond (PTTL 0) counts as run out, as `load` reports it.
-- KEYS: record, lease
-- ARGV: agent id, origin, offline retention ms, channel, publish command (PUBLISH or SPUBLISH)
if redis.call('PTTL', KEYS[2]) <= 0 or redis.call('EXISTS', KEYS[1]) == 0 then
  return false
end
local lease_ms = tonumber(redis.call('GET', KEYS[2]))
redis.call('PEXPIRE', KEYS[2], lease_ms)
redis.call('PEXPIRE', KEYS[1], lease_ms + tonumber(ARGV[3]))
redis.call(ARGV[5], ARGV[4], cjson.encode({
  op = 'renew', agent_id = ARGV[1], origin = ARGV[2], lease_left_ms = lease_ms,
}))
return lease_ms
