local left = redis.call('PTTL', KEYS[1])
local t = redis.call('TIME')
local stay = tonumber(ARGV[2])
if left > 0 and left < stay then
  stay = left
end
stay = stay + tonumber(ARGV[3])
redis.call('ZADD', KEYS[2], t[1] * 1000 + math.floor(t[2] / 1000) + stay, ARGV[1])
if redis.call('PTTL', KEYS[2]) < stay then
  redis.call('PEXPIRE', KEYS[2], stay)
end
return left
