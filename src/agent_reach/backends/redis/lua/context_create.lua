-- Store a new context at version 1 (see `ContextStore.create`); 0 when the id is taken.
-- KEYS: context
-- ARGV: document, names JSON, ttl ms, access (owner and shares, kept as given)
if redis.call('EXISTS', KEYS[1]) == 1 then
  return 0
end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'names', ARGV[2], 'ver', 1, 'ttl', ARGV[3], 'acl', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
