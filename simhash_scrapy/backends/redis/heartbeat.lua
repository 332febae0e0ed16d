-- simhash-scrapy: a worker's heartbeat.  KEYS[1] workers, KEYS[2] meta; ARGV: worker id, ttl ms
redis.call('ZADD', KEYS[1], redis.call('TIME')[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl); redis.call('PEXPIRE', KEYS[2], ttl) end
return 1
