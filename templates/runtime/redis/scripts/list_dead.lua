-- instances whose lease expired: KEYS instances; ARGV lease-ms, self -> instance IDs.
-- They are forgotten only after their tasks are failed (forget_dead.lua): a reaper that
-- dies midway leaves them for the next one (failing a task twice is a no-op).
local now = now_ms()
local dead = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[1]), 'LIMIT', 0, 100)
local out = {}
for _, d in ipairs(dead) do
  if d ~= ARGV[2] then out[#out + 1] = d end
end
return out
