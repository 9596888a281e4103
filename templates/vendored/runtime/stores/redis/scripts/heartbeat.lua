-- heartbeat: KEYS instances, clock; ARGV instance, cap-ms
-- -> the store clock (ms) recorded for the instance (store_clock in the prelude)
local up = store_clock(KEYS[2], tonumber(ARGV[2]))[1]
redis.call('ZADD', KEYS[1], up, ARGV[1])
return up
