local n = tonumber(ARGV[2])
local all = 1
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    if hand_over(KEYS[i], KEYS[n + i], KEYS[2 * n + i], ARGV[3], ARGV[3 + i]) == 0 then
      redis.call('DEL', KEYS[i])
    end
  else
    all = 0
  end
end
return all
