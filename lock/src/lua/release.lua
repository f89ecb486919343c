if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then
  redis.call('SET', KEYS[1], 'handoff:' .. ARGV[2], 'PX', ARGV[3])
  redis.call('DEL', KEYS[2])
  redis.call('RPUSH', KEYS[2], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
  return 1
end
return redis.call('DEL', KEYS[1])
