-- Store the final answer only while the fence still owns the key (compare-and-set).
-- KEYS: record
-- ARGV: fence, status, body, ttl ms
-- Returns 1 when stored, 0 (writing nothing) when another owner took over or it is done.
local record = redis.call('HMGET', KEYS[1], 'fence', 'body')
if not record[1] or record[1] ~= ARGV[1] or record[2] then
  return 0
end
redis.call('HSET', KEYS[1], 'status', ARGV[2], 'body', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[4])
return 1
