local n = tonumber(ARGV[2])
local waiters = #KEYS >= 2 * n
local all = 1
local reply = {0}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    if waiters and redis.call('EXISTS', KEYS[n + i]) == 1 then
      reply[#reply + 1] = i
    else
      redis.call('DEL', KEYS[i])
    end
  else
    all = 0
  end
end
reply[1] = all
return reply
