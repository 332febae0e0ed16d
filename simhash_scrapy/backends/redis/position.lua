-- simhash-scrapy: a near-duplicate's position in its cluster, shared by every worker (SIMHASH_KEEP_PER_CLUSTER).
--
-- KEYS[1]  the scope's positions (HASH, "S:positions"): field <anchor> = members counted after the anchor,
--          field <anchor> NUL <identity> = that member's position (the anchor is 1)
-- ARGV[1] the anchor's identity  ARGV[2] the member's identity  ARGV[3] ttl ms (0: none)
-- Returns the member's position: the one it got the first time it was placed.
local field = ARGV[1] .. '\0' .. ARGV[2]
local position = redis.call('HGET', KEYS[1], field)
if not position then
  position = redis.call('HINCRBY', KEYS[1], ARGV[1], 1) + 1
  redis.call('HSET', KEYS[1], field, position)
end
if tonumber(ARGV[3]) > 0 then redis.call('PEXPIRE', KEYS[1], ARGV[3]) end
return tonumber(position)
