-- Mark a key record revoked; 0 when there is no such record (nothing is created).
-- KEYS: the record's hash
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
redis.call('HSET', KEYS[1], 'revoked', '1')
return 1
