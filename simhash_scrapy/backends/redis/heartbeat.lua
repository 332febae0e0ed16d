-- simhash-scrapy: a worker's heartbeat.  KEYS: workers, meta, then keys whose TTL it renews; ARGV: worker id, ttl ms
-- Returns 1, or 0 when the global meta is gone (Redis, or the node holding it, restarted empty): the
-- caller registers again (open.lua) and lists its scopes again.
redis.call('ZADD', KEYS[1], redis.call('TIME')[1], ARGV[1])
local ttl = tonumber(ARGV[2])
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
end
if redis.call('HEXISTS', KEYS[2], 'layout') == 0 then return 0 end
return 1
