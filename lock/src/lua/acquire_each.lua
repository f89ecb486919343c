-- acquire_each: acquire.lua for each key on its own.
-- KEYS: n lock keys, then their n fence keys;
-- ARGV[1] TTL ms, [1+i] key i's token.
-- Reply: {fence or 0, ...}. One key held does not stop the others.
-- A key handed to a waiter holds its token: a batch never jumps a queue.
local n = #KEYS / 2
local reply = {}
for i = 1, n do
  if redis.call('SET', KEYS[i], ARGV[1 + i], 'NX', 'PX', ARGV[1]) then
    reply[i] = redis.call('INCR', KEYS[n + i])
  else
    reply[i] = 0
  end
end
return reply
