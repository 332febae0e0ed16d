-- simhash-scrapy: read the identity records of one shard for a check, claiming each identity
-- (SIMHASH_REDIS_SHARDS > 1; see layout.py).  A claim keeps two workers from checking one
-- identity at the same time (the record is read here and written back after the decision).
--
-- KEYS[1]   the shard's claims (HASH: claim field -> worker id and expiry, ms of server time)
-- KEYS[1+i] the identity bucket (HASH) of identity i
-- ARGV[1] worker id  ARGV[2] claim lifetime ms  then per identity: claim field (bucket >I3 .. field), field
-- Returns the shard's marker (the epoch of the scope that last wrote a record here, write.lua; "" when
-- none: a shard never written, or one that lost its data), then per identity: "B" (claimed by another
-- worker: busy), "N" (no record), or "R" .. record.
local now = redis.call('TIME')
now = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local me, life = ARGV[1], tonumber(ARGV[2])
local out = {redis.call('HGET', KEYS[1], '#epoch') or ''}
for i = 1, #KEYS - 1 do
  local cf, field = ARGV[1 + 2 * i], ARGV[2 + 2 * i]
  local claim = redis.call('HGET', KEYS[1], cf)
  local busy = false
  if claim then
    local expiry = struct.unpack('>d', claim)
    busy = string.sub(claim, 9) ~= me and expiry > now
  end
  if busy then
    out[i + 1] = 'B'
  else
    redis.call('HSET', KEYS[1], cf, struct.pack('>d', now + life) .. me)
    local v = redis.call('HGET', KEYS[1 + i], field)
    out[i + 1] = v and ('R' .. v) or 'N'
  end
end
return out
