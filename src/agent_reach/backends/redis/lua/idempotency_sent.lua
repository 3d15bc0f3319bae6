-- Note an agent the claim was delivered to, only while the fence still owns it.
-- KEYS: record
-- ARGV: fence, agent id (agent ids never hold a newline)
-- Returns 1 when noted (or already there), else 0.
local record = redis.call('HMGET', KEYS[1], 'fence', 'body', 'sent_to')
if not record[1] or record[1] ~= ARGV[1] or record[2] then
  return 0
end
local sent_to = record[3] or ''
for id in string.gmatch(sent_to, '[^\n]+') do
  if id == ARGV[2] then
    return 1
  end
end
if sent_to ~= '' then
  sent_to = sent_to .. '\n'
end
redis.call('HSET', KEYS[1], 'sent_to', sent_to .. ARGV[2])
return 1
