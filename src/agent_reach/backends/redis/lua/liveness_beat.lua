-- Renew one coordinator's liveness record and list the coordinators whose records ran out.
-- KEYS[1] the liveness hash (node id -> ms its record runs out, on Redis's own clock)
-- ARGV[1] node id, ARGV[2] ttl ms, ARGV[3] retention ms (a dead node is listed this long)
-- Returns the dead node ids.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local retention = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], now + tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]) + retention)
local dead = {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local until_ms = tonumber(fields[i + 1])
  if until_ms + retention <= now then
    redis.call('HDEL', KEYS[1], fields[i])
  elseif until_ms <= now then
    dead[#dead + 1] = fields[i]
  end
end
return dead
