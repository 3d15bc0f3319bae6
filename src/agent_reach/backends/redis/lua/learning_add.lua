-- Store or replace a learned example; drop expired ones and the capability's oldest
-- beyond `keep`; bump the version. Expiry is Redis TIME, in ms.
-- KEYS: documents hash, capability-of hash, the capability's zset, all-examples zset, version
-- ARGV: id, capability, document, ttl_ms, keep
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local dead = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now)
for _, id in ipairs(dead) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local expires = now + tonumber(ARGV[4])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], expires, ARGV[1])
redis.call('ZADD', KEYS[4], expires, ARGV[1])
local excess = redis.call('ZCARD', KEYS[3]) - tonumber(ARGV[5])
if excess > 0 then
  local oldest = redis.call('ZRANGE', KEYS[3], 0, excess - 1)
  for _, id in ipairs(oldest) do
    redis.call('HDEL', KEYS[1], id)
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[4], id)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, excess - 1)
end
return redis.call('INCR', KEYS[5])
