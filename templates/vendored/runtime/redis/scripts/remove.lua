-- delete / expire: KEYS task, idx, active, in, cl, ans
-- ARGV id, lexkey, now|'' (expire only when expired by then), channel|'' (expiry publishes
-- nothing: the sweeping engine wakes its own waiters after remembering the task as expired;
-- other instances notice on their next poll)  -> the removed task hash (empty: nothing removed)
local h = redis.call('HGETALL', KEYS[1])
if #h > 0 and ARGV[3] ~= '' then
  local x = redis.call('HGET', KEYS[1], 'x')
  if (not x) or tonumber(x) > tonumber(ARGV[3]) then return {} end
end
local lex = ARGV[2]
if #h > 0 then lex = redis.call('HGET', KEYS[1], 'k') end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
if lex ~= '' then redis.call('ZREM', KEYS[2], lex) end
redis.call('SREM', KEYS[3], ARGV[1])
if #h > 0 and ARGV[4] ~= '' then redis.call('PUBLISH', ARGV[4], 'd ' .. ARGV[1]) end
return h
