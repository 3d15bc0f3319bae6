-- Give back an in-progress claim, only while the fence still owns it and it is not completed.
-- A claim that reached an agent (sent_to set) keeps its record with the lease ended, so the
-- next claim takes it over knowing where it went; any other claim (or one given back with
-- forget: no agent acted on it) is deleted.
-- KEYS: record
-- ARGV: fence, forget ('1' or '0')
-- Returns 1 when the claim was given back, else 0.
local record = redis.call('HMGET', KEYS[1], 'fence', 'body', 'sent_to')
if not record[1] or record[1] ~= ARGV[1] or record[2] then
  return 0
end
if record[3] and record[3] ~= '' and ARGV[2] ~= '1' then
  redis.call('HSET', KEYS[1], 'lease_until', 0)
  return 1
end
return redis.call('DEL', KEYS[1])
