-- Entries for one consumer without blocking: stale ones first, then new ones.
-- Creates the consumer group on first use (and again if Redis lost it), starting at the
-- stream's beginning so entries pushed before any pull are delivered too.
-- KEYS: stream
-- ARGV: group, consumer, count, stale ms, then the dead consumers (their liveness ran out)
-- Returns {id, payload, id, payload, ...}.
local stream, group, consumer = KEYS[1], ARGV[1], ARGV[2]
local wanted = tonumber(ARGV[3])
local has_group = false
if redis.call('EXISTS', stream) == 1 then
  for _, info in ipairs(redis.call('XINFO', 'GROUPS', stream)) do
    has_group = has_group or info[2] == group
  end
end
if not has_group then
  redis.call('XGROUP', 'CREATE', stream, group, '0', 'MKSTREAM')
end

local out, taken = {}, 0
local function take(entries)
  for _, entry in ipairs(entries) do
    out[#out + 1] = entry[1]
    out[#out + 1] = entry[2][2]
    taken = taken + 1
  end
end

-- Every entry a dead consumer holds, however recently it touched it.
for i = 5, #ARGV do
  if taken >= wanted then
    break
  end
  local held = redis.call('XPENDING', stream, group, '-', '+', wanted - taken, ARGV[i])
  local ids = {}
  for _, entry in ipairs(held) do
    ids[#ids + 1] = entry[1]
  end
  if #ids > 0 then
    take(redis.call('XCLAIM', stream, group, consumer, 0, unpack(ids)))
  end
end

-- Claimed from consumers that stopped touching them (idle >= stale ms), scanning the
-- whole pending list if need be.
local cursor = '0-0'
while taken < wanted do
  local reply = redis.call('XAUTOCLAIM', stream, group, consumer, ARGV[4], cursor,
    'COUNT', wanted - taken)
  cursor = reply[1]
  take(reply[2])
  if cursor == '0-0' then
    break
  end
end

if taken < wanted then
  local fresh = redis.call('XREADGROUP', 'GROUP', group, consumer, 'COUNT', wanted - taken,
    'STREAMS', stream, '>')
  if fresh then
    take(fresh[1][2])
  end
end
return out
