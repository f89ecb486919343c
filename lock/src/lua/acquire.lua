-- acquire: take a free lock and bump its fence in one atomic step.
-- KEYS[1] lock key, KEYS[2] fence key; ARGV[1] token, ARGV[2] TTL ms.
-- Reply: the new fence, or 0 if the key is held.
-- No fence bump without the lock, and no lock without the bump.
-- The fence key never expires, so fences keep rising across TTLs.
-- Held, it publishes the holder's token on the lock key's channel: a
-- holder caching the lock (cache.c) gives it up on that notice.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
local holder = redis.call('GET', KEYS[1])
if holder then
  redis.call('PUBLISH', KEYS[1], holder)
end
return 0
