-- release: delete the lock only if it still holds our token.
-- KEYS[1] lock key; ARGV[1] token. Reply: 1 deleted, 0 not ours.
-- One atomic GET-compare-DEL: a lock that expired and was retaken
-- by another client is never deleted.
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
