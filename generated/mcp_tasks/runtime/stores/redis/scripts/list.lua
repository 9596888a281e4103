-- list: KEYS idx, active; ARGV task-key prefix, after lexkey|'', limit, face|'', first face
-- -> a JSON array of up to limit task hashes (objects) in (created_at, id) order, one bulk
--    reply, without the result and error payloads (a listing shows tasks, not what they
--    returned); with a face, only that face's tasks (a task stored before faces existed has
--    no 'f' field: it is the first face's); drops index entries of expired keys
local FIELDS = {'k', 'r', 'm', 's', 'c', 'u', 'ttl', 'pi', 'msg', 'v', 'f', 'tl'}
local min = '-'
if ARGV[2] ~= '' then min = '(' .. ARGV[2] end
local n = tonumber(ARGV[3])
local face = ARGV[4]
local out = {}
while #out < n do
  local ms = redis.call('ZRANGEBYLEX', KEYS[1], min, '+', 'LIMIT', 0, n - #out)
  if #ms == 0 then break end
  for _, m in ipairs(ms) do
    local id = string.sub(m, 17)
    local h = redis.call('HMGET', ARGV[1] .. id, unpack(FIELDS))
    if not h[1] then
      redis.call('ZREM', KEYS[1], m)
      redis.call('SREM', KEYS[2], id)
    elseif face == '' or (h[11] or ARGV[5]) == face then
      local t = {}
      for i, f in ipairs(FIELDS) do
        if h[i] then t[f] = h[i] end
      end
      out[#out + 1] = cjson.encode(t)
    end
  end
  min = '(' .. ms[#ms]
end
return '[' .. table.concat(out, ',') .. ']'
