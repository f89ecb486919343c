local v = redis.call('GET', KEYS[1])
local ours = v == ARGV[1]
if not ours and not (ARGV[4] and ARGV[4] ~= '' and v == 'handoff:' .. ARGV[4]) then
  return 0
end
local result = ours and 1 or 0
if KEYS[3] then
  local t = redis.call('TIME')
  redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', t[1] * 1000 + math.floor(t[2] / 1000))
  if redis.call('ZCARD', KEYS[3]) > 0 then
    redis.call('SET', KEYS[1], 'handoff:' .. ARGV[2], 'PX', ARGV[3])
    redis.call('DEL', KEYS[2])
    redis.call('RPUSH', KEYS[2], ARGV[2])
    redis.call('PEXPIRE', KEYS[2], ARGV[3])
    return result
  end
end
redis.call('DEL', KEYS[1])
return result
