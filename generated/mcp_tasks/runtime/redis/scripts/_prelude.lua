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


-- A task's status change, as every script that moves a status makes it. k: the task's keys
-- (task, active, in, cl, ans); cur: HMGET k[1] 's', 'u', 'v'. Sets the status, the last
-- update (never back in time: max(now, u)), the next version and the message (nil clears
-- it); a terminal status leaves the active set and drops the task's inputs, any other
-- joins it; publishes the change event on channel.
local function set_status(k, cur, id, status, now, msg, channel, terminal)
  local u = cur[2]
  if tonumber(now) > tonumber(u) then u = now end
  redis.call('HSET', k[1], 's', status, 'u', u, 'v', tonumber(cur[3]) + 1)
  if msg then redis.call('HSET', k[1], 'msg', msg)
  else redis.call('HDEL', k[1], 'msg') end
  if terminal then
    redis.call('SREM', k[2], id)
    redis.call('DEL', k[3], k[4], k[5])
  else
    redis.call('SADD', k[2], id)
  end
  redis.call('PUBLISH', channel, 's ' .. id)
end
