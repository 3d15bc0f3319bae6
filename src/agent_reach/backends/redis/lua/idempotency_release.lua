-- Forget an in-progress claim, only while the fence still owns it and it is not completed.
-- KEYS: record
-- ARGV: fence
-- Returns 1 when the record was deleted, else 0.
local record = redis.call('HMGET', KEYS[1], 'fence', 'body')
if not record[1] or record[1] ~= ARGV[1] or record[2] then
  return 0
end
return redis.call('DEL', KEYS[1])
