-- set a non-terminal task's ttl: KEYS task, in, cl, ans; ARGV ttl-ms, grace-ms, terminal
-- statuses (space separated)
-- -> {the task hash after the change as a JSON object, the key expiry set (ms)}, or false
-- (unknown task, or a terminal one: its ttl stays). The key expiry (the backstop) moves by as much as the ttl does, as
-- create.lua set it (relative: no clock of the instances is read); the expiry index entry
-- and the ID pointer (other slots) are the caller's next round trip.
local cur = redis.call('HMGET', KEYS[1], 'v', 'c', 'ttl', 's')
if not cur[1] then return false end
if string.find(' ' .. ARGV[3] .. ' ', ' ' .. cur[4] .. ' ', 1, true) then return false end
local ttl = tonumber(ARGV[1])
local x = tonumber(cur[2]) + ttl / 1000
redis.call('HSET', KEYS[1], 'ttl', ARGV[1], 'x', x, 'v', tonumber(cur[1]) + 1)
local px = redis.call('PTTL', KEYS[1])
local old = tonumber(cur[3] or '')
if px < 0 or not old then px = ttl + tonumber(ARGV[2]) else px = px + ttl - old end
if px < 1 then px = 1 end
for i = 1, 4 do redis.call('PEXPIRE', KEYS[i], px) end
return {hash_json(redis.call('HGETALL', KEYS[1])), px}
