-- delete / expire: KEYS task, idx, active, in, cl, ans
-- ARGV id, lexkey, now|'' (expire only when expired by then), channel|'' (expiry publishes
-- nothing: the sweeping engine wakes its own waiters after remembering the task as expired;
-- other instances notice on their next poll), terminal statuses|'' (space separated: the
-- delete of a task in one of them publishes nothing either: nothing waits on an ended task,
-- its end woke every waiter)  -> the removed task hash (empty: nothing removed)
local h = redis.call('HGETALL', KEYS[1])
local x, lex, s = nil, ARGV[2], nil
for i = 1, #h, 2 do
  if h[i] == 'x' then x = h[i + 1] elseif h[i] == 'k' then lex = h[i + 1]
  elseif h[i] == 's' then s = h[i + 1] end
end
if #h > 0 and ARGV[3] ~= '' then
  if (not x) or tonumber(x) > tonumber(ARGV[3]) then return {} end
end
redis.call('DEL', KEYS[1], KEYS[4], KEYS[5], KEYS[6])
if lex ~= '' then redis.call('ZREM', KEYS[2], lex) end
redis.call('SREM', KEYS[3], ARGV[1])
local ended = s and ARGV[5] and string.find(' ' .. ARGV[5] .. ' ', ' ' .. s .. ' ', 1, true)
if #h > 0 and ARGV[4] ~= '' and not ended then
  redis.call('PUBLISH', ARGV[4], 'd ' .. ARGV[1])
end
return h
