-- Add ARGV[1] to the chain's spent total (KEYS[1]) unless it would pass ARGV[2]; the
-- total expires ARGV[3] ms after its last spend. Returns the new total, or false.
local total = tonumber(redis.call('GET', KEYS[1]) or '0') + tonumber(ARGV[1])
if total > tonumber(ARGV[2]) then
  return false
end
redis.call('SET', KEYS[1], tostring(total), 'PX', ARGV[3])
return tostring(total)
