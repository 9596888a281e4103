-- withdraw an input nobody answered: KEYS in, cl, ans; ARGV input id -> 1
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
