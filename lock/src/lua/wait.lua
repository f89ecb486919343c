local left = redis.call('PTTL', KEYS[1])
if left > 0 and redis.call('PTTL', KEYS[2]) < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[2], '1', 'PX', ARGV[1])
end
return left
