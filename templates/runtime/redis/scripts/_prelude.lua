-- Prepended to every script when it is loaded (scripting.py): helpers shared by all.

-- Redis server time in milliseconds (one clock for every instance: leases, claims).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end


-- A hash (HGETALL's flat reply) as one JSON object ('' when empty): the client parses one
-- bulk string instead of two per field (codec.as_dict takes either form).
local function hash_json(h)
  if #h == 0 then return '' end
  local t = {}
  for i = 1, #h, 2 do t[h[i]] = h[i + 1] end
  return cjson.encode(t)
end
