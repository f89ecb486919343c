-- release_each: pass.lua for each key on its own.
-- Needs hand_over (handoff.lua, which the build puts in front).
-- KEYS: n lock keys, n fence keys, n waiters sets.
-- ARGV[1] list prefix, [1+i] key i's token, [1+n+i] its list suffix.
-- Reply: {1 or 0, ...}, 0 = not our token.
local n = #KEYS / 3
local reply = {}
for i = 1, n do
  if redis.call('GET', KEYS[i]) == ARGV[1 + i] then
    if hand_over(KEYS[i], KEYS[n + i], KEYS[2 * n + i], ARGV[1], ARGV[1 + n + i]) == 0 then
      redis.call('DEL', KEYS[i])
    end
    reply[i] = 1
  else
    reply[i] = 0
  end
end
return reply
