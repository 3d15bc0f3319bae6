-- Append items to a list, all or none (see `ContextStore.append`): fill the current
-- segment, open new ones when full, refuse when the context would pass its segment limit.
-- KEYS: context
-- ARGV: expected version or '', list name, items per segment, bytes per segment,
--       max live segments, items...
-- Returns {state, version, pttl ms}.
local state = redis.call('HMGET', KEYS[1], 'ver', 'ttl', 'names')
if not state[1] then
  return {'missing', 0, 0}
end
local version = tonumber(state[1])
if ARGV[1] ~= '' and ARGV[1] ~= state[1] then
  return {'conflict', version, 0}
end
local name = ARGV[2]
for _, field in ipairs(cjson.decode(state[3])) do
  if field == name then
    return {'not_a_list', version, 0}
  end
end
local per_items, per_bytes, max_segments = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local live_segments = 0
local first, current, count, size = 1, 0, 0, 0
for list, value in pairs(lists_of(KEYS[1])) do
  local f, c, n, s = parse_list(value)
  f = first_live(KEYS[1], list, f, c)
  live_segments = live_segments + c - f + 1
  if list == name then
    first, current, count, size = f, c, n, s
  end
end
-- Plan first: which segment each item goes to, and how many segments that opens.
local is_open = first <= current
local targets, opened = {}, 0
for i = 6, #ARGV do
  local bytes = #ARGV[i]
  if not is_open or count >= per_items or (count > 0 and size + bytes > per_bytes) then
    current, count, size, is_open = current + 1, 0, 0, true
    opened = opened + 1
  end
  count, size = count + 1, size + bytes
  targets[i] = current
end
if live_segments + opened > max_segments then
  return {'too_many_segments', version, 0}
end
local ttl_ms = tonumber(state[2])
for i = 6, #ARGV do
  redis.call('RPUSH', segment_key(KEYS[1], name, targets[i]), ARGV[i])
  if targets[i] ~= targets[i + 1] then
    raise_ttl(segment_key(KEYS[1], name, targets[i]), ttl_ms)
  end
end
redis.call('HSET', KEYS[1], 'l:' .. name, format_list(first, current, count, size))
return written(KEYS[1], ttl_ms)
