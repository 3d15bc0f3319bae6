-- Reset the idle time of entries this consumer still holds (an entry already handed to
-- another consumer is left alone). JUSTID: the delivery count does not grow.
-- KEYS: stream
-- ARGV: group, consumer, entry id...
for i = 3, #ARGV do
  local held = redis.pcall('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if held.err then
    -- No group (Redis lost its data, or nothing was ever pulled): nothing is held.
    if string.sub(held.err, 1, 7) == 'NOGROUP' then
      return 0
    end
    return held
  end
  if #held > 0 then
    redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0, ARGV[i], 'JUSTID')
  end
end
return 0
