-- offer input: KEYS task, active, in, cl, ans; ARGV id, input id, item json, channel, now,
--      message, working, input_required
-- Queues the input request and, when the task is working, moves it to input_required with
-- the message, in one step.
-- -> the task hash after the move as a JSON object, '' when queued without a move (the task
--    waits for input already), or false when the task is gone or ended (nothing queued)
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'msg')
if cur[1] ~= ARGV[7] and cur[1] ~= ARGV[8] then return false end
local ttl = redis.call('PTTL', KEYS[1])
redis.call('HSET', KEYS[3], ARGV[2], ARGV[3])
if ttl > 0 then redis.call('PEXPIRE', KEYS[3], ttl) end
redis.call('PUBLISH', ARGV[4], 'i ' .. ARGV[1])
if cur[1] ~= ARGV[7] then return '' end
set_status(KEYS, cur, ARGV[1], ARGV[8], ARGV[5], ARGV[6], ARGV[4], false)
return hash_json(redis.call('HGETALL', KEYS[1]))
