-- An entry is done: off the pending list and out of the stream, at once.
-- KEYS: stream
-- ARGV: group, entry id
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return redis.call('XDEL', KEYS[1], ARGV[2])
