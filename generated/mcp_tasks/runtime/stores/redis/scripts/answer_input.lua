-- answer: KEYS in, cl, ans; ARGV input id, answer json, id, channel
-- -> 1, or 0 if the input is no longer pending (answered once only)
if redis.call('HDEL', KEYS[1], ARGV[1]) == 0 then return 0 end
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], ARGV[2])
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
redis.call('PUBLISH', ARGV[4], 'a ' .. ARGV[3])
return 1
