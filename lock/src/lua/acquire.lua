if KEYS[3] then
  redis.call('ZREM', KEYS[3], ARGV[4])
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
if ARGV[3] and ARGV[3] ~= '' and redis.call('GET', KEYS[1]) == 'handoff:' .. ARGV[3] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return redis.call('INCR', KEYS[2])
end
return 0
