-- acquire_each: acquire.lua for each key on its own.
-- KEYS: n lock keys, then their n fence keys;
-- ARGV[1] TTL ms, [1+i] key i's token.
-- Reply: {fence or 0, ...}. One key held does not stop the others.
-- A key handed to a waiter holds its token: a batch never jumps a queue.
-- A key held gets its holder's token published, as acquire.lua does: a
-- holder caching it (cache.c) gives it up on that notice.
local n = #KEYS / 2
local reply = {}
for i = 1, n do
  if redis.call('SET', KEYS[i], ARGV[1 + i], 'NX', 'PX', ARGV[1]) then
    reply[i] = redis.call('INCR', KEYS[n + i])
  else
    reply[i] = 0
    local holder = redis.call('GET', KEYS[i])
    if holder then
      redis.call('PUBLISH', KEYS[i], holder)
    end
  end
end
return reply
