-- multi_fence_sync: fence_sync.lua for each key.
-- KEYS: fence keys; ARGV[i] key i's fence. Reply: 1.
for i = 1, #KEYS do
  local cur = tonumber(redis.call('GET', KEYS[i]) or '0')
  if cur < tonumber(ARGV[i]) then
    redis.call('SET', KEYS[i], ARGV[i])
  end
end
return 1
