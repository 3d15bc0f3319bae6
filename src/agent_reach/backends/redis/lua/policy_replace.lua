-- Store the next revision of the policy and append its audit record, or refuse.
-- Refused (returns {0, revision}) when ARGV[1] is a revision other than the stored one
-- (0: nothing stored), or when ARGV[4] names the file content the store already took.
-- KEYS: the policy hash, the audit stream
-- ARGV: expected revision ('' any), document, version, file digest ('' keep),
--       at, by, source, audit cap
local stored = redis.call('HMGET', KEYS[1], 'revision', 'version', 'file_digest')
local revision = tonumber(stored[1] or '0')
if ARGV[1] ~= '' and tonumber(ARGV[1]) ~= revision then
  return {0, revision}
end
if ARGV[4] ~= '' and stored[3] == ARGV[4] then
  return {0, revision}
end
local before = stored[2] or ''
revision = revision + 1
redis.call('HSET', KEYS[1], 'revision', revision, 'version', ARGV[3], 'document', ARGV[2])
if ARGV[4] ~= '' then
  redis.call('HSET', KEYS[1], 'file_digest', ARGV[4])
end
redis.call('XADD', KEYS[2], 'MAXLEN', '=', ARGV[8], '*',
  'revision', revision, 'at', ARGV[5], 'by', ARGV[6], 'source', ARGV[7],
  'before', before, 'after', ARGV[3])
return {1, revision, before}
