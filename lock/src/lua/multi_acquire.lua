-- multi_acquire: several resources as one lock, all or nothing.
-- KEYS: n lock keys, then their n fence keys; ARGV[1] token, [2] TTL ms.
-- Reply: {1, fence_1..fence_n}, or {0, i} (key i held; nothing changed).
-- Checking all keys before setting any rules out hold-and-wait.
local n = #KEYS / 2
for i = 1, n do
  local holder = redis.call('GET', KEYS[i])
  if holder then
    -- The notice a holder caching key i waits for (cache.c).
    redis.call('PUBLISH', KEYS[i], holder)
    return {0, i}
  end
end
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  reply[i + 1] = redis.call('INCR', KEYS[n + i])
end
return reply
