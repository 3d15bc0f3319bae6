-- Helpers every context script starts with (contexts.py prepends this file to each).
-- A context is a hash: doc, ver, ttl (ms), acl (owner and shares, never changed), names
-- (JSON array of the document's top-level fields) and, per appended list, 'l:<name>' =
-- 'first:current:count:size': its oldest possibly live and its current segment number,
-- and the current segment's item count and bytes. Segment <n> of list <name> is the
-- Redis list '<context key>:<name>:<n>', in the context's hash slot. Segments expire
-- oldest first, so the live ones are a suffix.

local function segment_key(context, name, seq)
  return context .. ':' .. name .. ':' .. seq
end

local function parse_list(value)
  local first, current, count, size = string.match(value, '^(%d+):(%d+):(%d+):(%d+)$')
  return tonumber(first), tonumber(current), tonumber(count), tonumber(size)
end

local function format_list(first, current, count, size)
  return string.format('%d:%d:%d:%d', first, current, count, size)
end

-- The list's first live segment number (current + 1 when none is live).
local function first_live(context, name, first, current)
  while first <= current and redis.call('EXISTS', segment_key(context, name, first)) == 0 do
    first = first + 1
  end
  return first
end

-- Extend an expiry to at least `ms` from now; never shortens one.
local function raise_ttl(key, ms)
  if redis.call('PTTL', key) < ms then
    redis.call('PEXPIRE', key, ms)
  end
end

-- list name -> its 'l:' value, without loading the document.
local function lists_of(context)
  local lists = {}
  for _, field in ipairs(redis.call('HKEYS', context)) do
    if string.sub(field, 1, 2) == 'l:' then
      lists[string.sub(field, 3)] = redis.call('HGET', context, field)
    end
  end
  return lists
end

local function delete_list(context, name, value)
  local first, current = parse_list(value)
  for seq = first, current do
    redis.call('UNLINK', segment_key(context, name, seq))
  end
  redis.call('HDEL', context, 'l:' .. name)
end

local function written(context, ttl_ms)
  local version = redis.call('HINCRBY', context, 'ver', 1)
  raise_ttl(context, ttl_ms)
  return {'written', version, redis.call('PTTL', context)}
end
