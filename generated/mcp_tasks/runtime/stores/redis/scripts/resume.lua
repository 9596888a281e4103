-- resume: KEYS task, active, in, cl, ans; ARGV id, channel, now, input_required, working
-- Moves an input_required task to working unless an input request is pending, in one step.
-- -> the task hash after the move as a JSON object, or false (no move)
if redis.call('HLEN', KEYS[3]) > 0 then return false end
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'msg')
if cur[1] ~= ARGV[4] then return false end
set_status(KEYS, cur, ARGV[1], ARGV[5], ARGV[3], nil, ARGV[2], false)
return hash_json(redis.call('HGETALL', KEYS[1]))
