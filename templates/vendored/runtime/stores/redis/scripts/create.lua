-- create: KEYS task, idx, active
-- ARGV id, lexkey, pexpire-ms|'', active 0|1, max-active|'', field, value, ...
-- -> 1, 0 if it exists, -1 if the requestor has max-active active tasks or more (R-SEC-4)
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if ARGV[5] ~= '' and redis.call('SCARD', KEYS[3]) >= tonumber(ARGV[5]) then return -1 end
redis.call('HSET', KEYS[1], unpack(ARGV, 6))
if ARGV[3] ~= '' then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
redis.call('ZADD', KEYS[2], 0, ARGV[2])
if ARGV[4] == '1' then redis.call('SADD', KEYS[3], ARGV[1]) end
return 1
