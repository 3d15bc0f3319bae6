-- Delete record and lease at once; 1, a new registry version and an event when something
-- was deleted, else 0.
-- KEYS: record, lease, listing, version
-- ARGV: agent id, origin, channel, publish command (PUBLISH or SPUBLISH)
local deleted = redis.call('DEL', KEYS[1], KEYS[2])
redis.call('SREM', KEYS[3], ARGV[1])
if deleted == 0 then
  return 0
end
redis.call('INCR', KEYS[4])
redis.call(ARGV[4], ARGV[3], cjson.encode({
  op = 'remove', agent_id = ARGV[1], origin = ARGV[2], lease_left_ms = 0,
}))
return 1
