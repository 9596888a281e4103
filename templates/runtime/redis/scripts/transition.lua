-- transition: KEYS task, active, in, cl, ans
-- ARGV id, status, now, has-msg, msg, result|'', error|'', channel,
--      terminal statuses (space separated), allowed status, ...
-- -> the task hash after the change as a JSON object, or false (unknown task, status not allowed)
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v')
if not cur[1] then return false end
local ok = false
for i = 10, #ARGV do
  if ARGV[i] == cur[1] then ok = true break end
end
if not ok then return false end
local u = cur[2]
if tonumber(ARGV[3]) > tonumber(u) then u = ARGV[3] end
redis.call('HSET', KEYS[1], 's', ARGV[2], 'u', u, 'v', tonumber(cur[3]) + 1)
if ARGV[4] == '1' then redis.call('HSET', KEYS[1], 'msg', ARGV[5])
else redis.call('HDEL', KEYS[1], 'msg') end
if ARGV[6] ~= '' then redis.call('HSET', KEYS[1], 'res', ARGV[6]) end
if ARGV[7] ~= '' then redis.call('HSET', KEYS[1], 'err', ARGV[7]) end
if string.find(' ' .. ARGV[9] .. ' ', ' ' .. ARGV[2] .. ' ', 1, true) then
  redis.call('SREM', KEYS[2], ARGV[1])
  redis.call('DEL', KEYS[3], KEYS[4], KEYS[5])
else
  redis.call('SADD', KEYS[2], ARGV[1])
end
redis.call('PUBLISH', ARGV[8], 's ' .. ARGV[1])
return hash_json(redis.call('HGETALL', KEYS[1]))
