-- put input: KEYS task, in; ARGV id, input id, json, channel -> 1, or 0 if the task is gone
local ttl = redis.call('PTTL', KEYS[1])
if ttl == -2 then return 0 end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
redis.call('PUBLISH', ARGV[4], 'i ' .. ARGV[1])
return 1
