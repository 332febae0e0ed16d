-- simhash-scrapy: write back the identity records of one shard after a check, releasing the
-- claims, and read the records of canonical pages the verdicts name in this shard
-- (SIMHASH_REDIS_SHARDS > 1; see claim.lua and layout.py).
--
-- KEYS[1]   the shard's claims (HASH; field "#epoch": the marker, the epoch of the scope whose records
--           the shard holds: a shard that lost its records has none, see claim.lua)
-- KEYS[1+i] the identity bucket (HASH) of record i (i = 1..w), then of each record to read
-- ARGV[1] worker id  ARGV[2] ttl ms (0: none)  ARGV[3] w  ARGV[4] the scope's epoch
--   then per record written: claim field, field, record; then per record read: field
-- Returns per record read: its value, or "" when it is not there (yet).
local me, ttl, w = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
if w > 0 then redis.call('HSET', KEYS[1], '#epoch', ARGV[4]) end
for i = 1, w do
  local cf, field, record = ARGV[2 + 3 * i], ARGV[3 + 3 * i], ARGV[4 + 3 * i]
  redis.call('HSET', KEYS[1 + i], field, record)
  local claim = redis.call('HGET', KEYS[1], cf)
  if claim and string.sub(claim, 9) == me then redis.call('HDEL', KEYS[1], cf) end
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1 + i], ttl) end
end
if ttl > 0 and redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], ttl) end
local out = {}
for j = 1, #KEYS - 1 - w do
  out[j] = redis.call('HGET', KEYS[1 + w + j], ARGV[4 + 3 * w + j]) or ''
end
return out
