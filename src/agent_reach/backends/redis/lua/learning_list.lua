-- Every unexpired learned example's document.
-- KEYS: documents hash, all-examples zset
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ids = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf')
if #ids == 0 then
  return {}
end
return redis.call('HMGET', KEYS[1], unpack(ids))
