-- The document and the live segments of some lists, in one consistent read; renews the
-- context (not its segments). Advances each loaded list's first segment past expired ones.
-- KEYS: context
-- ARGV: 'all' or 'some', then the list names to load when 'some'
-- Returns nil, or {document, version, pttl ms, {list names}, {name, {items}, ...}, segments read}.
local flat = redis.call('HGETALL', KEYS[1])
if #flat == 0 then
  return false
end
local head = {}
for i = 1, #flat, 2 do
  head[flat[i]] = flat[i + 1]
end
raise_ttl(KEYS[1], tonumber(head.ttl))
local wanted = {}
for i = 2, #ARGV do
  wanted[ARGV[i]] = true
end
local names, loaded, segments_read = {}, {}, 0
for field, value in pairs(head) do
  if string.sub(field, 1, 2) == 'l:' then
    local name = string.sub(field, 3)
    names[#names + 1] = name
    if ARGV[1] == 'all' or wanted[name] then
      local first, current, count, size = parse_list(value)
      local live = first_live(KEYS[1], name, first, current)
      if live ~= first then
        redis.call('HSET', KEYS[1], field, format_list(live, current, count, size))
      end
      local items = {}
      for seq = live, current do
        local segment = redis.call('LRANGE', segment_key(KEYS[1], name, seq), 0, -1)
        if #segment > 0 then
          segments_read = segments_read + 1
        end
        for _, item in ipairs(segment) do
          items[#items + 1] = item
        end
      end
      loaded[#loaded + 1] = name
      loaded[#loaded + 1] = items
    end
  end
end
return {head.doc, tonumber(head.ver), redis.call('PTTL', KEYS[1]), names, loaded, segments_read}
