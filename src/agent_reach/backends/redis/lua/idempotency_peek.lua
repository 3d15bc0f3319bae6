-- A key's state without claiming it: completed, in_progress while the lease is live,
-- else nil (no record, or an owner whose lease ran out). Leases use Redis TIME.
-- KEYS: record
-- Returns {state, fence[, status, body]} ({'in_progress', fence, node}) or nil.
local record = redis.call('HMGET', KEYS[1], 'fence', 'lease_until', 'status', 'body', 'node')
if not record[1] then
  return false
end
if record[4] then
  return {'completed', tonumber(record[1]), tonumber(record[3]), record[4]}
end
local time = redis.call('TIME')
if tonumber(record[2]) > tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000) then
  return {'in_progress', tonumber(record[1]), record[5] or ''}
end
return false
