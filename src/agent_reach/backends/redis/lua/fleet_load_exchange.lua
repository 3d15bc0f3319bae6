-- Publish one coordinator's in-flight counts and sum the other fresh ones.
-- KEYS[1] fleet load hash; ARGV[1] node id, ARGV[2] JSON counts, ARGV[3] stale ms.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local stale = tonumber(ARGV[3])
redis.call('HSET', KEYS[1], ARGV[1], now .. ' ' .. ARGV[2])
redis.call('PEXPIRE', KEYS[1], stale * 10)
local totals = {}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields, 2 do
  local node, value = fields[i], fields[i + 1]
  local space = string.find(value, ' ', 1, true)
  local published = tonumber(string.sub(value, 1, space - 1))
  if published < now - stale then
    redis.call('HDEL', KEYS[1], node)
  elseif node ~= ARGV[1] then
    for agent, count in pairs(cjson.decode(string.sub(value, space + 1))) do
      totals[agent] = (totals[agent] or 0) + count
    end
  end
end
return cjson.encode(totals)
