-- Every retained record and its lease PTTL in ms (0 when gone), as one atomic read.
-- Ids whose record has expired are pruned from the listing on the way.
-- KEYS: listing
-- ARGV: the registry's key prefix ("<prefix>:{<prefix>:registry}:"), so every key read is in this slot
local out = {}
for _, id in ipairs(redis.call('SMEMBERS', KEYS[1])) do
  local record = redis.call('GET', ARGV[1] .. 'agent:' .. id)
  if record then
    out[#out + 1] = record
    out[#out + 1] = math.max(redis.call('PTTL', ARGV[1] .. 'lease:' .. id), 0)
  else
    redis.call('SREM', KEYS[1], id)
  end
end
return out
