if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  while true do
    local first = redis.call('ZRANGE', KEYS[3], 0, 0, 'WITHSCORES')
    if #first == 0 then
      break
    end
    redis.call('ZREM', KEYS[3], first[1])
    local tok, ttl, stay = string.match(first[1], '^(%x+):(%d+):(%d+)$')
    local since_us = now_us - tonumber(first[2])
    if tok and since_us < tonumber(stay) * 1000 then
      local list = ARGV[2] .. tok .. ARGV[3]
      redis.call('SET', KEYS[1], tok, 'PX', ttl)
      local fence = redis.call('INCR', KEYS[2])
      redis.call('DEL', list)
      redis.call('RPUSH', list, tostring(fence))
      redis.call('PEXPIRE', list, ttl)
      return 1
    end
  end
end
redis.call('DEL', KEYS[1])
return 1
