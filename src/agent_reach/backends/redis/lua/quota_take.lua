-- Take one token from a bucket; 0 when taken, else milliseconds until one will be there.
-- Time is Redis's TIME, so coordinators with skewed clocks still share one honest bucket.
-- KEYS: the bucket's hash
-- ARGV: refill rate per second, burst (capacity)
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1]) or burst
local at = tonumber(state[2]) or now_ms
tokens = math.min(burst, tokens + (now_ms - at) * rate / 1000)
local wait_ms = 0
if tokens >= 1 then
  tokens = tokens - 1
else
  wait_ms = math.ceil((1 - tokens) * 1000 / rate)
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', now_ms)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst * 1000 / rate) + 1000)
return wait_ms
