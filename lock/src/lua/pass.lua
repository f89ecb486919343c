if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if ARGV[4] == '1' then
  redis.call('DEL', ARGV[2] .. ARGV[1] .. ARGV[3])
end
if hand_over(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[3]) == 0 then
  redis.call('DEL', KEYS[1])
end
return 1
