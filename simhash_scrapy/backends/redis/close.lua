-- simhash-scrapy: deregister a worker.  KEYS[1] workers; ARGV: worker id, stale seconds
-- Returns the number of other workers still running (0: the caller may delete the state).
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
