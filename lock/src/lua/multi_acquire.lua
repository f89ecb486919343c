local n = #KEYS / 2
for i = 1, n do
  if redis.call('EXISTS', KEYS[i]) == 1 then
    return {0, i}
  end
end
local reply = {1}
for i = 1, n do
  redis.call('SET', KEYS[i], ARGV[1], 'PX', ARGV[2])
  reply[i + 1] = redis.call('INCR', KEYS[n + i])
end
return reply
