-- forget a reaped instance unless it heartbeated meanwhile: KEYS instances; ARGV lease-ms, id
-- -> 1 forgotten, 0 it is alive again
local now = now_ms()
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if score and tonumber(score) <= now - tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
