-- Replace the document only while the stored version is the expected one (compare-and-set);
-- drop the named lists with their segments; version + 1; renew.
-- KEYS: context
-- ARGV: expected version, document, names JSON, lists to drop...
-- Returns {state, version, pttl ms}: written, or conflict/missing changing nothing.
local state = redis.call('HMGET', KEYS[1], 'ver', 'ttl')
if not state[1] then
  return {'missing', 0, 0}
end
if state[1] ~= ARGV[1] then
  return {'conflict', tonumber(state[1]), 0}
end
for i = 4, #ARGV do
  local value = redis.call('HGET', KEYS[1], 'l:' .. ARGV[i])
  if value then
    delete_list(KEYS[1], ARGV[i], value)
  end
end
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'names', ARGV[3])
return written(KEYS[1], tonumber(state[2]))
