-- extend: reset the TTL only if the lock still holds our token.
-- KEYS[1] lock key; ARGV[1] token, ARGV[2] TTL ms.
-- Reply: 1 extended, 0 not ours. Renewal never re-acquires.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
