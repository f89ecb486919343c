local n = #KEYS / 3
local reply = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1 + i] then
    if hand_over(KEYS[i], KEYS[n + i], KEYS[2 * n + i], ARGV[1], ARGV[1 + n + i]) == 0 then
      redis.call('DEL', KEYS[i])
    end
    reply[i] = 1
  else
    reply[i] = 0
  end
end
return reply
