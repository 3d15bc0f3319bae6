-- The token key all coordinators share: store the candidate unless one is there, return it.
-- KEYS: secret
-- ARGV: candidate
redis.call('SET', KEYS[1], ARGV[1], 'NX')
return redis.call('GET', KEYS[1])
