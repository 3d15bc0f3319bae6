-- Store or replace a record and start a fresh lease; record, lease, listing, the registry's
-- version and the event at once.
-- KEYS: record, lease, listing, version
-- ARGV: agent id, record JSON, lease ms, record ms (lease + offline retention), channel,
--       event JSON, publish command (PUBLISH, or SPUBLISH on a cluster: the channel is in this slot)
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[4])
redis.call('SET', KEYS[2], ARGV[3], 'PX', ARGV[3])
redis.call('SADD', KEYS[3], ARGV[1])
redis.call('INCR', KEYS[4])
redis.call(ARGV[7], ARGV[5], ARGV[6])
return 1
