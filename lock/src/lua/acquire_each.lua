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
