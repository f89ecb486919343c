-- pass: release, handing the key to the oldest live waiter if any.
-- Needs hand_over (handoff.lua, which the build puts in front).
-- KEYS: lock, fence, waiters set; ARGV[1] token,
-- [2] and [3] the waiter list's prefix and suffix,
-- [4] "1" to delete our own list (Redlock: an unread announcement).
-- Reply: 1 released or handed over, 0 not ours.
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
