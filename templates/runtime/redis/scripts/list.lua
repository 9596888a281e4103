-- list: KEYS idx, active; ARGV task-key prefix, after lexkey|'', limit
-- -> a JSON array of up to limit task hashes (objects) in (created_at, id) order, one bulk
--    reply; drops index entries of expired keys
local min = '-'
if ARGV[2] ~= '' then min = '(' .. ARGV[2] end
local n = tonumber(ARGV[3])
local out = {}
while #out < n do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, n - #out)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local id = string.sub(m, 17)
    local h = redis.call('HGETALL', ARGV[1] .. id)
    if #h == 0 then
      redis.call('ZREM', KEYS[1], m)
      redis.call('SREM', KEYS[2], id)
    else
      out[#out + 1] = hash_json(h)
    end
  end
  min = '(' .. ms[#ms]
end
return '[' .. table.concat(out, ',') .. ']'
