-- create: KEYS task, idx, active
-- ARGV id, lexkey, pexpire-ms|'', active 0|1, field, value, ...  -> 1, or 0 if it exists
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], unpack(ARGV, 5))
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('ZADD', KEYS[2], 0, ARGV[2])
if ARGV[4] == '1' then redis.call('SADD', KEYS[3], ARGV[1]) end
return 1
