-- enter: a waiter's attempt and listing in one step (queue.c, rqueue.c).
-- KEYS: lock, fence, waiters set, the caller's list.
-- ARGV[1] token, [2] TTL ms, [3] member "<token>:<ttl>:<stay ms>",
-- [4] waiters-set TTL ms, [5] "1" if this call may be listed already.
-- Redlock only: [6] proposed score us, [7] send time us, [8] slack us,
-- [9] "1" to push the fence onto the caller's list on success.
-- Reply: {1, fence, pttl} if the key is ours (pttl -1: just taken),
-- else {0, holder's pttl, fence, our score}: we are listed (ZADD NX).
-- A key that holds our token was handed to us and is ours. Listing
-- empties our list, so a later wake-up comes from a later hand-off.
-- Listed, it publishes the holder's token on the lock key's channel: a
-- holder caching the lock (cache.c) hands it over on that notice.
local fence, pttl, holder
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if ARGV[5] == '1' then
    redis.call('ZREM', KEYS[3], ARGV[3])
    redis.call('DEL', KEYS[4])
  end
  fence, pttl = redis.call('INCR', KEYS[2]), -1
else
  holder = redis.call('GET', KEYS[1])
  redis.call('DEL', KEYS[4])
  if holder == ARGV[1] then
    fence, pttl = tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])
  end
end
if fence then
  if ARGV[9] == '1' then
    redis.call('RPUSH', KEYS[4], tostring(fence))
    redis.call('PEXPIRE', KEYS[4], ARGV[2])
  end
  return {1, fence, pttl}
end
fence = tonumber(redis.call('GET', KEYS[2])) or 0
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local score = now
if ARGV[6] then
  local off = now - tonumber(ARGV[7])
  score = tonumber(ARGV[6])
  if math.abs(off) > tonumber(ARGV[8]) then
    score = score + off
  end
end
redis.call('ZADD', KEYS[3], 'NX', string.format('%.0f', score), ARGV[3])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[4]) then
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
end
if holder then
  redis.call('PUBLISH', KEYS[1], holder)
end
return {0, redis.call('PTTL', KEYS[1]), fence, tonumber(redis.call('ZSCORE', KEYS[3], ARGV[3]))}
