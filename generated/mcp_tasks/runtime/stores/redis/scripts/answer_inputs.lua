-- answer inputs: KEYS task, active, in, cl, ans; ARGV id, channel, now, input_required,
--      working, then pairs of input id, answer json
-- Stores the answer of every input still pending (drops it from the pending and claimed
-- ones) and, when none is left pending, moves an input_required task to working, in one
-- step.
-- -> {the task hash after the move as a JSON object or '', input id taken, ...}
local out = {''}
for i = 6, #ARGV, 2 do
  if redis.call('HDEL', KEYS[3], ARGV[i]) == 1 then
    redis.call('HDEL', KEYS[4], ARGV[i])
    redis.call('HSET', KEYS[5], ARGV[i], ARGV[i + 1])
    out[#out + 1] = ARGV[i]
  end
end
if #out == 1 then return out end
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[5], ttl) end
redis.call('PUBLISH', ARGV[2], 'a ' .. ARGV[1])
if redis.call('HLEN', KEYS[3]) == 0 then
  local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'msg')
  if cur[1] == ARGV[4] then
    set_status(KEYS, cur, ARGV[1], ARGV[5], ARGV[3], nil, ARGV[2], false)
    out[1] = hash_json(redis.call('HGETALL', KEYS[1]))
  end
end
return out
