-- Forget one learned example of a known capability; 0 when there was none.
-- KEYS: documents hash, capability-of hash, the capability's zset, all-examples zset, version
-- ARGV: id, capability
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
  return 0
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[4], ARGV[1])
redis.call('INCR', KEYS[5])
return 1
