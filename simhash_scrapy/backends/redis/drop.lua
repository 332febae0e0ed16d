-- simhash-scrapy: delete a scope's meta and log if the scope is still the incarnation ARGV[1] (its
-- epoch): a shard of it lost its records (SIMHASH_REDIS_SHARDS on a Redis Cluster whose node restarted
-- empty), so its log names records that are gone; the scope is made anew by the next check.
-- KEYS[1] the scope's meta, KEYS[2] its log, KEYS[3] its cluster positions (SIMHASH_KEEP_PER_CLUSTER > 1),
-- KEYS[4] its extras (steps 5-7: mirror.py).
-- Returns 1 if deleted.
if (redis.call('HGET', KEYS[1], 'epoch') or '') == ARGV[1] then
  redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
  return 1
end
return 0
