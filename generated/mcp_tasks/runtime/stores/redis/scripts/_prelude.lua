-- Prepended to every script when it is loaded (scripting.py): helpers shared by all.

-- Redis server time in milliseconds (one clock for every instance: leases, claims).
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end


-- A hash (HGETALL's flat reply) as one JSON object ('' when empty): the client parses one
-- bulk string instead of two per field (codec.as_dict takes either form). Fields named in
-- skip (a set) are left out: the caller has them (a result it just wrote).
local function hash_json(h, skip)
  if #h == 0 then return '' end
  local t = {}
  for i = 1, #h, 2 do
    if not (skip and skip[h[i]]) then t[h[i]] = h[i + 1] end
  end
  return cjson.encode(t)
end



-- The store clock (milliseconds) of a namespace: Redis server time as the instances could
-- see it. Each contact of an instance (heartbeat, reaper) advances it by the time since the
-- previous contact; a gap longer than cap-ms was an outage (nobody reached Redis, or Redis
-- was stopped): the clock stands still over it, and the end of the outage is recorded, so
-- that no lease is judged before a whole lease of clock has passed since (every live
-- instance has had a full lease of working store to heartbeat in). A fresh store starts
-- the clock at the server time, as if an outage had just ended.
-- key: a hash (t: server time of the last contact, up: the clock, o: the last outage's end)
-- -> {clock, outage end}
local function store_clock(key, cap)
  local now = now_ms()
  local cur = redis.call('HMGET', key, 't', 'up', 'o')
  local up, o = now, now
  if cur[1] and cur[2] then
    local d = now - tonumber(cur[1])
    up = tonumber(cur[2])
    o = 0
    if cur[3] then o = tonumber(cur[3]) end
    if d > cap then o = up elseif d > 0 then up = up + d end
  end
  redis.call('HSET', key, 't', now, 'up', up, 'o', o)
  return {up, o}
end
-- A task's status change, as every script that moves a status makes it. k: the task's keys
-- (task, active, in, cl, ans); cur: HMGET k[1] 's', 'u', 'v', 'msg'. Sets the status, the last
-- update (never back in time: max(now, u)), the next version, the message (nil clears
-- it) and the fields of extra (field, value, ...: a result, an error) in one HSET; a
-- terminal status leaves the active set and drops the task's inputs, any other joins it;
-- publishes the change event on channel.
local function set_status(k, cur, id, status, now, msg, channel, terminal, extra)
  local u = cur[2]
  if tonumber(now) > tonumber(u) then u = now end
  local set = {'s', status, 'u', u, 'v', tonumber(cur[3]) + 1}
  if msg then set[#set + 1] = 'msg'; set[#set + 1] = msg end
  if extra then for _, f in ipairs(extra) do set[#set + 1] = f end end
  redis.call('HSET', k[1], unpack(set))
  if cur[4] and not msg then redis.call('HDEL', k[1], 'msg') end
  if terminal then
    redis.call('SREM', k[2], id)
    redis.call('DEL', k[3], k[4], k[5])
  else
    redis.call('SADD', k[2], id)
  end
  redis.call('PUBLISH', channel, 's ' .. id)
end
