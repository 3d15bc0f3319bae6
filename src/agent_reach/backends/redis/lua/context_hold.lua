-- Keep a context and its live segments for at least the given time (never shortening an
-- expiry): how the sweeper protects contexts that in-flight requests refer to.
-- KEYS: context
-- ARGV: hold ms
-- Returns 1 when the context exists, else 0.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 0
end
local hold_ms = tonumber(ARGV[1])
raise_ttl(KEYS[1], hold_ms)
for name, value in pairs(lists_of(KEYS[1])) do
  local first, current = parse_list(value)
  for seq = first_live(KEYS[1], name, first, current), current do
    raise_ttl(segment_key(KEYS[1], name, seq), hold_ms)
  end
end
return 1
