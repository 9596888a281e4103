-- heartbeat: KEYS instances; ARGV instance  -> the server time (ms) recorded for it
local now = now_ms()
redis.call('ZADD', KEYS[1], now, ARGV[1])
return now
