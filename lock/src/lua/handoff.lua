-- hand_over: the one hand-off rule, put in front of pass, multi_release
-- and release_each. The host has checked the token and deletes the key
-- itself when this returns 0 (nobody to hand to).
-- Pops the oldest listing whose stay has not run out, sets the key to
-- its token and TTL, bumps the fence and pushes it onto the waiter's list
-- (list_prefix .. token .. list_suffix: a key not in KEYS, which a
-- standalone Redis allows). Returns 1 if handed over. With no waiters
-- set it returns at once: no TIME, no ZRANGE.
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
