-- forget a reaped instance unless it heartbeated meanwhile: KEYS instances, clock;
-- ARGV lease-ms, id, cap-ms -> 1 forgotten, 0 it is alive again
local up = store_clock(KEYS[2], tonumber(ARGV[3]))[1]
local score = redis.call('ZSCORE', KEYS[1], ARGV[2])
if score and tonumber(score) <= up - tonumber(ARGV[1]) then
  redis.call('ZREM', KEYS[1], ARGV[2])
  return 1
end
return 0
