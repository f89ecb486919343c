-- leave: a waiter gives up; it takes its listing off and empties its list.
-- KEYS: lock, fence, waiters set, the caller's list; ARGV[1] token, [2] member.
-- Reply: {1, fence, pttl} if a release handed us the key meanwhile
-- (the caller then holds it: never leaked), else {0, 0}.
redis.call('ZREM', KEYS[3], ARGV[2])
redis.call('DEL', KEYS[4])
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return {1, tonumber(redis.call('GET', KEYS[2])), redis.call('PTTL', KEYS[1])}
end
return {0, 0}
