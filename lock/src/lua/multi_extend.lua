-- multi_extend: reset every key's TTL, only if every key holds our token.
-- KEYS: the lock keys; ARGV[1] token, [2] TTL ms. Reply: 1, or 0 (none touched).
for i = 1, #KEYS do
  if redis.call('GET', KEYS[i]) ~= ARGV[1] then
    return 0
  end
end
for i = 1, #KEYS do
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
