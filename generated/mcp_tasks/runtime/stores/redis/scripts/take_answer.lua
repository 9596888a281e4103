-- take an answer: KEYS ans; ARGV input id -> the answer's JSON, or false
local a = redis.call('HGET', KEYS[1], ARGV[1])
if a then redis.call('HDEL', KEYS[1], ARGV[1]) end
return a
