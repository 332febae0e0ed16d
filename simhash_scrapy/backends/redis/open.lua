-- simhash-scrapy: register a worker (and decide whether to flush).  KEYS[1] meta, KEYS[2] workers
-- ARGV: worker id, flush on start ("1"/"0"), stale seconds, layout, ttl ms, identity bucket bits
-- Returns {other workers, 1 if the caller must flush now (then it calls again without flushing), bucket bits}
local now = tonumber(redis.call('TIME')[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - tonumber(ARGV[3]))
local others = redis.call('ZCARD', KEYS[2])
if ARGV[2] == '1' and others == 0 and redis.call('EXISTS', KEYS[1]) == 1 then
  return {others, 1, 0}
end
local layout = redis.call('HGET', KEYS[1], 'layout')
if layout and layout ~= ARGV[4] then
  return redis.error_reply('SIMHASH_LAYOUT ' .. layout)
end
if not layout then
  redis.call('HSET', KEYS[1], 'layout', ARGV[4], 'created', now, 'seq', 0, 'bucket_bits', ARGV[6])
end
if others == 0 then
  -- the first worker of a new crawl: it records 'records_at_start' (backend.py) once it has counted
  redis.call('HDEL', KEYS[1], 'records_at_start')
end
redis.call('ZADD', KEYS[2], now, ARGV[1])
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl); redis.call('PEXPIRE', KEYS[2], ttl)
end
return {others, 0, tonumber(redis.call('HGET', KEYS[1], 'bucket_bits'))}
