-- get: KEYS task -> the task hash as a JSON object ('' when unknown)
return hash_json(redis.call('HGETALL', KEYS[1]))
