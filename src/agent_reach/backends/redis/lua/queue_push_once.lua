-- Append an entry unless one was pushed under the same marker within its time to live.
-- KEYS: stream, marker (same slot)
-- ARGV: payload field, payload, marker ttl ms
if not redis.call('SET', KEYS[2], '1', 'NX', 'PX', ARGV[3]) then
  return 0
end
redis.call('XADD', KEYS[1], '*', ARGV[1], ARGV[2])
return 1
