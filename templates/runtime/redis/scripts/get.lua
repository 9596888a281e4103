-- get: KEYS task -> the task hash (empty when unknown)
return redis.call('HGETALL', KEYS[1])
