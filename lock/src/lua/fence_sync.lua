-- fence_sync: raise a fence counter to ARGV[1] if it is lower.
-- KEYS[1] fence key; ARGV[1] fence. Reply: 1.
-- Counters only ever go up (acquire.c says why nodes must agree).
local cur = tonumber(redis.call('GET', KEYS[1]) or '0')
if cur < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
end
return 1
