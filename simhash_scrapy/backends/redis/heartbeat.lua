-- simhash-scrapy: a worker's heartbeat.  KEYS: workers, then keys whose TTL it renews; ARGV: worker id, ttl ms
redis.call('ZADD', KEYS[1], redis.call('TIME')[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
end
return 1
