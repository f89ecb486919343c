redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('DEL', KEYS[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
end
return {0, 0}
