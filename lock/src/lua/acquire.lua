local function won()
  if KEYS[3] then
    redis.call('ZREM', KEYS[3], ARGV[4])
  end
  return redis.call('INCR', KEYS[2])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return won()
end
if ARGV[3] and ARGV[3] ~= '' and redis.call('GET', KEYS[1]) == 'handoff:' .. ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return won()
end
return 0
