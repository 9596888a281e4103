-- release a claim: KEYS cl; ARGV input id, claimer, id, channel -> 1
local c = redis.call('HGET', KEYS[1], ARGV[1])
if c and string.sub(c, string.find(c, ' ', 1, true) + 1) == ARGV[2] then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('PUBLISH', ARGV[4], 'i ' .. ARGV[3])
end
return 1
