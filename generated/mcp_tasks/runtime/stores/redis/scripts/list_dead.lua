-- instances whose lease expired: KEYS instances, clock; ARGV lease-ms, self, cap-ms
-- -> instance IDs that have not heartbeated for a whole lease of store clock (store_clock
-- in the prelude: time the store could be reached), none until a whole lease has passed
-- since the last outage ended. They are forgotten only after their tasks are failed
-- (forget_dead.lua): a reaper that dies midway leaves them for the next one (failing a
-- task twice is a no-op).
local clock = store_clock(KEYS[2], tonumber(ARGV[3]))
local lease = tonumber(ARGV[1])
if clock[1] - clock[2] < lease then return {} end
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', clock[1] - lease, 'LIMIT', 0, 100)
local out = {}
for _, d in ipairs(dead) do
  if d ~= ARGV[2] then out[#out + 1] = d end
end
return out
