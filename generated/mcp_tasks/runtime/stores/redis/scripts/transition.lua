-- transition: KEYS task, active, in, cl, ans
-- ARGV id, status, now, has-msg, msg, result|'', error|'', channel,
--      terminal statuses (space separated), allowed status, ...
-- -> the task hash after the change as a JSON object, without the result and error written
--    here (the caller has them), or false (unknown task, status not allowed)
local cur = redis.call('HMGET', KEYS[1], 's', 'u', 'v', 'msg')
if not cur[1] then return false end
local ok = false
for i = 10, #ARGV do
  if ARGV[i] == cur[1] then ok = true break end
end
if not ok then return false end
local extra, written = {}, {}
if ARGV[6] ~= '' then extra[#extra + 1] = 'res'; extra[#extra + 1] = ARGV[6]; written.res = true end
if ARGV[7] ~= '' then extra[#extra + 1] = 'err'; extra[#extra + 1] = ARGV[7]; written.err = true end
local msg = nil
if ARGV[4] == '1' then msg = ARGV[5] end
local terminal = string.find(' ' .. ARGV[9] .. ' ', ' ' .. ARGV[2] .. ' ', 1, true)
set_status(KEYS, cur, ARGV[1], ARGV[2], ARGV[3], msg, ARGV[8], terminal, extra)
return hash_json(redis.call('HGETALL', KEYS[1]), written)
