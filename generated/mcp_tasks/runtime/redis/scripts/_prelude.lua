-- Prepended to every script when it is loaded (scripting.py): helpers shared by all.

-- Redis server time in milliseconds (one clock for every instance: leases, claims).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

