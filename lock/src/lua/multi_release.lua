-- multi_release: release every key of a multi lock that holds our token.
-- Needs hand_over (handoff.lua, which the build puts in front).
-- KEYS: n lock keys, n fence keys, n waiters sets.
-- ARGV[1] token, [2] n, [3] list prefix, [3+i] key i's list suffix.
-- Reply: 1 if every key was ours, else 0. A key with waiters is
-- handed to the oldest of them, never deleted under them.
local n = tonumber(ARGV[2])
local all = 1
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1] then
    if hand_over(KEYS[i], KEYS[n + i], KEYS[2 * n + i], ARGV[3], ARGV[3 + i]) == 0 then
      redis.call('DEL', KEYS[i])
    end
  else
    all = 0
  end
end
return all
