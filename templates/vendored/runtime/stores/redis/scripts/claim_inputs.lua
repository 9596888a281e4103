-- claim inputs: KEYS in, cl; ARGV claimer, lease-ms -> list of the claimed inputs' JSON
-- (a claim is "until-ms claimer"; an expired claim, or the claimer's own, is free)
local now = now_ms()
local all = redis.call('HGETALL', KEYS[1])
local out = {}
for i = 1, #all, 2 do
  local c = redis.call('HGET', KEYS[2], all[i])
  local free = true
  if c then
    local sep = string.find(c, ' ', 1, true)
    local until_ms = tonumber(string.sub(c, 1, sep - 1))
    if until_ms > now and string.sub(c, sep + 1) ~= ARGV[1] then free = false end
  end
  if free then
    redis.call('HSET', KEYS[2], all[i], (now + tonumber(ARGV[2])) .. ' ' .. ARGV[1])
    out[#out + 1] = all[i + 1]
  end
end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return out
