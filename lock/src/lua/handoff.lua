local function hand_over(key, fkey, waiters, list_prefix, list_suffix)
  if redis.call('EXISTS', waiters) == 0 then
    return 0
  end
  local t = redis.call('TIME')
  local now_us = tonumber(t[1]) * 1000000 + tonumber(t[2])
  while true do
    local first = redis.call('ZRANGE', waiters, 0, 0, 'WITHSCORES')
    if #first == 0 then
      return 0
    end
    redis.call('ZREM', waiters, first[1])
    local tok, ttl, stay = string.match(first[1], '^(%x+):(%d+):(%d+)$')
    if tok and now_us - tonumber(first[2]) < tonumber(stay) * 1000 then
      local list = list_prefix .. tok .. list_suffix
      redis.call('SET', key, tok, 'PX', ttl)
      local fence = redis.call('INCR', fkey)
      redis.call('DEL', list)
      redis.call('RPUSH', list, tostring(fence))
      redis.call('PEXPIRE', list, ttl)
      return 1
    end
  end
end
