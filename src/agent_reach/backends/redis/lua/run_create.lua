-- Create a workflow run's record unless the key is taken, and list it among the newest.
-- KEYS[1] the run's record, KEYS[2] the recent list
-- ARGV[1] record, ARGV[2] ttl in ms, ARGV[3] how many keys the list keeps, ARGV[4] the run key
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[4])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
