-- fail a dead owner's task: KEYS task, active, in, cl, ans
-- ARGV id, owner, now, msg, error, failed status, channel, terminal statuses
-- -> the task hash after the change, or false (gone, another owner, already terminal)
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'o')
if not cur[1] or cur[4] ~= ARGV[2] then return false end
if string.find(' ' .. ARGV[8] .. ' ', ' ' .. cur[1] .. ' ', 1, true) then return false end
local u = cur[2]
if tonumber(ARGV[3]) > tonumber(u) then u = ARGV[3] end
redis.call('HSET', KEYS[1], 's', ARGV[6], 'u', u, 'v', tonumber(cur[3]) + 1, 'msg', ARGV[4])
if redis.call('HEXISTS', KEYS[1], 'err') == 0 then redis.call('HSET', KEYS[1], 'err', ARGV[5]) end
redis.call('SREM', KEYS[2], ARGV[1])
redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
redis.call('PUBLISH', ARGV[7], 's ' .. ARGV[1])
return redis.call('HGETALL', KEYS[1])
