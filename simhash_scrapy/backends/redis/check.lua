-- simhash-scrapy: check a batch of pages of one scope, atomically (see layout.py for the key layout).
--
-- KEYS[1]  the sequence counter (HASH, field "seq": first-check order of identities)
-- KEYS[2]  the scope's meta (HASH: layout, scope, canonicals)
-- KEYS[3]  the scope's canonical log (STRING of 24-byte entries)
-- KEYS[4]  the scope's extras (STRING of records: ">I4I2" log position or NO_POSITION, length, then what
--   steps 5-7 keep of a page that reached step 7: see mirror.py)
-- KEYS[4+i] the identity bucket (HASH) of record i (not with shards)
-- ARGV[1] layout  ARGV[2] k  ARGV[3] sync position (log entries the caller's replica holds)
-- ARGV[4] bucket key prefix  ARGV[5] ttl ms (0: none)  ARGV[6] scope name
-- ARGV[7] "1" when the identity records live in shards (SIMHASH_REDIS_SHARDS > 1): the caller read
--   each record from its shard (and claimed the identity there), passes it in, and writes back the
--   record this script returns; the script touches only this slot's keys.
-- ARGV[8] the scope's incarnation the caller's replica was built from: "-" (none: the replica holds
--   nothing), else "=" .. the meta's epoch ("=" alone: a scope made before epochs existed)
-- ARGV[9] the epoch to give the scope's meta if this call creates it (a fresh random token)
-- ARGV[10] the byte offset of the extras the caller's mirror holds (-1: it has no mirror of the scope)
-- then one value per record: with shards, ">I3I4" (bucket, length of the old record) and the old
--   record first; then ">c8c8Bc8I4I2": field (8 bytes), fingerprint (8 bytes), mode (1: index, 2: exact),
--   seen (8-byte big-endian double), length of the local candidates, number of one-edit keys; then the
--   local candidates (">I4I4B" each: log position, seq, distance; EDIT_MATCH: found by a one-edit
--   key), the one-edit keys (8 bytes each), with MODE_EXTRA the hint of the caller's mirror (">I4I4BB": log
--   position or NO_POSITION, seq, kind (1: template or second simhash, a candidate within k like the local
--   ones; 2: sentence containment, taken only when nothing else matches), distance) and the page's extras
--   record (">I2" length, then the record), then the payload.
-- When the scope is not the one the caller's replica was built from (Redis restarted empty, the keys were
-- flushed or expired and made again), or its log is shorter than the caller's sync position (a log that
-- lost its tail), the script changes nothing and returns the error "SIMHASH_RESET <same> <records>"
-- (same: 1 if the meta is the same incarnation; records: identities the scope records now): the caller
-- drops its replica, counts the pages lost and checks the batch again.
-- Returns {tail of the log since the sync position, verdicts, "=" .. epoch, records, tail of the extras since
--   ARGV[10]}: verdicts is, per record, ">BBI4B" (outcome,
--   parts: 1 canonical, 2 canonical payload, 4 previous, 8 new record, 16 canonical's bucket, 32 the hint
--   was taken; seq;
--   distance), then [canonical fingerprint, field (16 bytes)], [">I4" length and canonical payload],
--   [previous fingerprint, previous seen (16 bytes)], [">I4" length and the new record],
--   [canonical's bucket and log position (">I3I4")].
-- ENTRY, EDIT_MATCH (the distance of a match by one-edit key until the real one is computed), OP_*, F_*,
-- MODE_*, OUTCOME_SHIFT, the outcome codes (UNIQUE, NEAR_DUPLICATE, ...), K_* and PART_* come from layout.py
-- (layout.lua_constants(): the line the backend puts before this script).
local band, bor, bxor, rshift = bit.band, bit.bor, bit.bxor, bit.rshift
-- The content digest in a payload (layout.Codec: kind byte, [12 identity bytes], [8 digest bytes]), or nil: none,
-- or a head cut short (as Codec.digest_of reads it).
local function digest_of(payload)
  local kind = string.byte(payload, 1)
  if not kind or band(kind, K_DIGEST) == 0 then return nil end
  local at = 2
  if band(kind, K_HEX_IDENTITY) ~= 0 then at = 14 end
  local digest = string.sub(payload, at, at + 7)
  if #digest ~= 8 then return nil end
  return digest
end
local function pop(x)
  x = x - band(rshift(x, 1), 0x55555555)
  x = band(x, 0x33333333) + band(rshift(x, 2), 0x33333333)
  x = band(x + rshift(x, 4), 0x0F0F0F0F)
  x = x + rshift(x, 8)
  x = x + rshift(x, 16)
  return band(x, 0x3F)
end

local layout = redis.call('HGET', KEYS[2], 'layout')
local sync = tonumber(ARGV[3])
local loglen = redis.call('STRLEN', KEYS[3]) / ENTRY
local epoch = layout and ('=' .. (redis.call('HGET', KEYS[2], 'epoch') or '')) or '-'
if ARGV[8] ~= '-' and (epoch ~= ARGV[8] or sync > loglen) then
  return redis.error_reply('SIMHASH_RESET ' .. (epoch == ARGV[8] and '1 ' or '0 ') ..
    (redis.call('HGET', KEYS[2], 'records') or '0'))
end
if not layout then
  redis.call('HSET', KEYS[2], 'layout', ARGV[1], 'scope', ARGV[6], 'canonicals', 0, 'epoch', ARGV[9])
  epoch = '=' .. ARGV[9]
elseif layout ~= ARGV[1] then
  return redis.error_reply('SIMHASH_LAYOUT ' .. layout)
end
if sync > loglen then sync = loglen end  -- a replica that holds nothing ("-") and a log made anew
local k = tonumber(ARGV[2])
local prefix = ARGV[4]
local sharded = ARGV[7] == '1'
-- The entries appended since the caller's sync, as parallel arrays (simhash and exact apart).
local removed = {}
local fpos, fhi, flo, fseq, nf = {}, {}, {}, {}, 0
local xpos, xfp, xseq, nx = {}, {}, {}, 0
local kkey, kown, kseq, nk = {}, {}, {}, 0  -- one-edit key entries: key, position of the add entry, seq
if loglen > sync then
  local tail = redis.call('GETRANGE', KEYS[3], sync * ENTRY, loglen * ENTRY - 1)
  for j = 0, loglen - sync - 1 do
    local p = j * ENTRY + 1
    local op = string.byte(tail, p)
    if op == OP_REMOVE then
      removed[struct.unpack('>I4', tail, p + 1)] = true
    else
      local hi, lo, eseq = struct.unpack('>I4I4I4', tail, p + 1)
      if op == OP_EXACT then
        nx = nx + 1; xpos[nx] = sync + j; xfp[nx] = string.sub(tail, p + 1, p + 8); xseq[nx] = eseq
      elseif op == OP_EDIT_KEY then
        nk = nk + 1; kkey[nk] = string.sub(tail, p + 1, p + 8); kseq[nk] = eseq
        kown[nk] = struct.unpack('>I4', tail, p + 13)
      else
        nf = nf + 1; fpos[nf] = sync + j; fhi[nf] = hi; flo[nf] = lo; fseq[nf] = eseq
      end
    end
  end
end
local delta = 0

local function append_add(fp, exact, seq, bucket, field, keys)
  local pos = loglen
  local entries = {string.char(exact and OP_EXACT or OP_ADD) .. fp .. struct.pack('>I4I3', seq, bucket) .. field}
  loglen = loglen + 1
  if exact then
    nx = nx + 1; xpos[nx] = pos; xfp[nx] = fp; xseq[nx] = seq
  else
    local hi, lo = struct.unpack('>I4I4', fp)
    nf = nf + 1; fpos[nf] = pos; fhi[nf] = hi; flo[nf] = lo; fseq[nf] = seq
    -- The one-edit keys follow their add entry; each names it, so it goes with it.
    local owner = struct.pack('>I4I4', seq, pos) .. string.rep('\0', 7)
    for i = 1, #keys, 8 do
      local key = string.sub(keys, i, i + 7)
      entries[#entries + 1] = string.char(OP_EDIT_KEY) .. key .. owner
      loglen = loglen + 1
      nk = nk + 1; kkey[nk] = key; kown[nk] = pos; kseq[nk] = seq
    end
  end
  redis.call('APPEND', KEYS[3], table.concat(entries))
  delta = delta + 1
  return pos
end

local function append_remove(pos)
  redis.call('APPEND', KEYS[3], string.char(OP_REMOVE) .. struct.pack('>I4', pos) .. string.rep('\0', ENTRY - 5))
  loglen = loglen + 1
  removed[pos] = true
  delta = delta - 1
end

-- The nearest canonical page within k (ties: the identity checked first), excluding the log entry ``own``;
-- else the first-checked canonical page sharing one of ``keys`` (one-edit keys), at its real distance.
-- A hint (mirror.py) of kind 1 is one more local candidate; of kind 2 (step 7) it is taken when nothing else
-- matched.  Returns also whether the hint was taken.
local function best_match(fp, hi, lo, exact, locals, own, keys, hint)
  local bd, bp, bs, contained = EDIT_MATCH + 1, -1, -1, false
  for i = 1, #locals, 9 do
    local pos, seq, d = struct.unpack('>I4I4B', locals, i)
    if pos ~= own and not removed[pos] and (d < bd or (d == bd and seq < bs)) then
      bd, bp, bs = d, pos, seq
    end
  end
  if hint and hint.kind == 1 and hint.pos ~= own and not removed[hint.pos] and
      (hint.d < bd or (hint.d == bd and hint.seq < bs)) then
    bd, bp, bs = hint.d, hint.pos, hint.seq
  end
  if exact then
    for i = 1, nx do
      local pos, seq = xpos[i], xseq[i]
      if xfp[i] == fp and pos ~= own and not removed[pos] and (0 < bd or seq < bs) then bd, bp, bs = 0, pos, seq end
    end
  else
    for i = 1, nf do
      local d = pop(bxor(fhi[i], hi))
      if d <= k then
        d = d + pop(bxor(flo[i], lo))
        if d <= k then
          local pos, seq = fpos[i], fseq[i]
          if pos ~= own and not removed[pos] and (d < bd or (d == bd and seq < bs)) then bd, bp, bs = d, pos, seq end
        end
      end
    end
    if bd >= EDIT_MATCH and nk > 0 and #keys > 0 then
      local mine = {}
      for i = 1, #keys, 8 do mine[string.sub(keys, i, i + 7)] = true end
      for i = 1, nk do
        local pos, seq = kown[i], kseq[i]
        if mine[kkey[i]] and pos ~= own and not removed[pos] and (bd > EDIT_MATCH or seq < bs) then
          bd, bp, bs = EDIT_MATCH, pos, seq
        end
      end
    end
    if bp < 0 and hint and hint.kind == 2 and hint.pos ~= own and not removed[hint.pos] then
      bd, bp, contained = EDIT_MATCH, hint.pos, true
    end
    if bd == EDIT_MATCH then
      local chi, clo = struct.unpack('>I4I4', redis.call('GETRANGE', KEYS[3], bp * ENTRY + 1, bp * ENTRY + 8))
      bd = pop(bxor(chi, hi)) + pop(bxor(clo, lo))
    end
  end
  return bp, bd, contained or (hint ~= nil and hint.kind == 1 and bp == hint.pos)
end

-- A page that reached step 7 (nothing matched it, or its containment hint did) leaves its extras record.
local function append_extras(extras, pos)
  if extras and #extras > 0 then
    redis.call('APPEND', KEYS[4], struct.pack('>I4I2', pos or NO_POSITION, #extras) .. extras)
  end
end

-- The canonical page at log position pos: {its fingerprint (the one it is indexed with now, at its own log
-- position, which is pos unless it changed since; else its latest), its field}, and its identity record's
-- payload.
-- A page checked against the index (new, or changed): near-duplicate of the best match, else
-- ``otherwise`` (UNIQUE or CHANGED) and indexed unless ``index=False``.  Returns outcome, own, canon, dist.
local function decide(otherwise, fp, hi, lo, exact, locals, own, want_index, seq, bucket, field, keys, hint, extras)
  local bp, bd, hinted = best_match(fp, hi, lo, exact, locals, own, keys, hint)
  if bp >= 0 then
    if hinted and hint.kind == 2 then append_extras(extras, nil) end
    return NEAR_DUPLICATE, nil, bp, bd, hinted
  end
  local pos
  if want_index then pos = append_add(fp, exact, seq, bucket, field, keys) end
  append_extras(extras, pos)
  return otherwise, pos, nil, 0, false
end

local function canonical_of(pos)
  local e = redis.call('GETRANGE', KEYS[3], pos * ENTRY, pos * ENTRY + ENTRY - 1)
  local bucket = struct.unpack('>I3', e, 14)
  local field = string.sub(e, 17, 24)
  -- With shards the record is in another slot: the caller reads it (its payload) by the bucket.
  if sharded then return string.sub(e, 2, 9) .. field, false, struct.pack('>I3I4', bucket, pos) end
  local v = redis.call('HGET', prefix .. string.format('%x', bucket), field)
  if not v then return string.sub(e, 2, 9) .. field, false end
  local flags = string.byte(v, 13)
  local fp = string.sub(e, 2, 9)
  local p = 15
  if band(flags, F_INDEXED) ~= 0 then
    local own = struct.unpack('>I4', v, p)
    if own ~= pos then fp = redis.call('GETRANGE', KEYS[3], own * ENTRY + 1, own * ENTRY + 8) end
    p = p + 4
  else
    fp = string.sub(v, 5, 12)
  end
  if band(flags, F_MEMBER) ~= 0 then p = p + 4 end
  if band(flags, F_PREV) ~= 0 then p = p + 8 end
  p = p + 8
  if band(flags, F_LAST) ~= 0 then p = p + 8 end
  return fp .. field, string.sub(v, p)
end

-- With shards a record lives in another slot than the log: a shard that kept its records while the log
-- was lost (a Redis Cluster node restarted empty) holds records naming positions of a log that is gone.
-- Such a record is stale: the identity is checked as new.  (Without shards both go together.)
local function live(pos, field, bucket)
  if pos >= loglen then return false end
  local e = redis.call('GETRANGE', KEYS[3], pos * ENTRY, pos * ENTRY + ENTRY - 1)
  local op = string.byte(e, 1)
  if op ~= OP_ADD and op ~= OP_EXACT then return false end
  return field == nil or (string.sub(e, 17, 24) == field and struct.unpack('>I3', e, 14) == bucket)
end

local out = {}
for i = 1, #ARGV - 10 do
  local key, blob = KEYS[4 + i], ARGV[10 + i]
  local bucket, old
  if sharded then
    local oldlen, at0
    bucket, oldlen, at0 = struct.unpack('>I3I4', blob)
    if oldlen > 0 then old = string.sub(blob, at0, at0 + oldlen - 1) end
    blob = string.sub(blob, at0 + oldlen)
  end
  local field, fp, mode, seen, nloc, nkeys, at = struct.unpack('>c8c8Bc8I4I2', blob)
  local locals = string.sub(blob, at, at + nloc - 1)
  local keys = string.sub(blob, at + nloc, at + nloc + 8 * nkeys - 1)
  at = at + nloc + 8 * nkeys
  local hint, extras
  if band(mode, MODE_EXTRA) ~= 0 then
    local hpos, hseq, hkind, hd, xlen
    hpos, hseq, hkind, hd, xlen, at = struct.unpack('>I4I4BBI2', blob, at)
    if hpos ~= NO_POSITION then hint = {pos = hpos, seq = hseq, kind = hkind, d = hd} end
    extras = string.sub(blob, at, at + xlen - 1)
    at = at + xlen
  end
  local payload = string.sub(blob, at)
  local exact = band(mode, MODE_EXACT) ~= 0
  local want_index = band(mode, MODE_INDEX) ~= 0
  if not sharded then
    bucket = tonumber(string.sub(key, #prefix + 1), 16)
    old = redis.call('HGET', key, field)
  end
  local hi, lo = struct.unpack('>I4I4', fp)
  local outcome, seq, first, own, canon, dist, prev, prevseen, hinted
  local step7 = false  -- found by sentence containment (the page's hint): D_CONTAINMENT in its record
  dist = 0
  if old and sharded then
    local oflags, p = string.byte(old, 13), 15
    if band(oflags, F_INDEXED) ~= 0 then
      if not live(struct.unpack('>I4', old, p), field, bucket) then old = nil end
      p = p + 4
    end
    if old and band(oflags, F_MEMBER) ~= 0 and not live((struct.unpack('>I4', old, p))) then old = nil end
  end
  if old then
    local oseq, ofp, oflags, odist, p = struct.unpack('>I4c8BB', old)
    local oown, ocanon, oprev, ofirst, olast
    if band(oflags, F_INDEXED) ~= 0 then oown, p = struct.unpack('>I4', old, p) end
    if band(oflags, F_MEMBER) ~= 0 then ocanon, p = struct.unpack('>I4', old, p) end
    if band(oflags, F_PREV) ~= 0 then p = p + 8 end
    olast = string.sub(old, p, p + 7)
    ofirst = olast
    p = p + 8
    if band(oflags, F_LAST) ~= 0 then olast = string.sub(old, p, p + 7); p = p + 8 end
    local odigest = digest_of(string.sub(old, p))
    seq, first, prev, prevseen = oseq, ofirst, ofp, olast
    local d = 65
    if (band(oflags, F_EXACT) ~= 0) == exact then
      if exact then
        if ofp == fp then d = 0 end
      else
        local ohi, olo = struct.unpack('>I4I4', ofp)
        d = pop(bxor(ohi, hi)) + pop(bxor(olo, lo))
      end
    end
    if d <= k then
      -- Within k: unchanged when the text is the same (or either digest is unknown), else edited.
      local ndigest = digest_of(payload)
      if exact or not odigest or not ndigest or odigest == ndigest then
        outcome = UNCHANGED
      else
        outcome = EDITED
      end
      own, canon, dist = oown, ocanon, odist % D_CONTAINMENT
      step7 = odist >= D_CONTAINMENT  -- (the member keeps how it was found)
    else
      if oown then append_remove(oown) end
      outcome, own, canon, dist, hinted =
        decide(CHANGED, fp, hi, lo, exact, locals, oown or -1, want_index, seq, bucket, field, keys, hint, extras)
    end
  else
    seq = redis.call('HINCRBY', KEYS[1], 'seq', 1) - 1
    redis.call('HINCRBY', KEYS[2], 'records', 1)
    first = seen
    outcome, own, canon, dist, hinted =
      decide(UNIQUE, fp, hi, lo, exact, locals, -1, want_index, seq, bucket, field, keys, hint, extras)
  end
  if hinted and hint.kind == 2 then step7 = true end
  local flags = bit.lshift(outcome, OUTCOME_SHIFT)
  if exact then flags = bor(flags, F_EXACT) end
  local parts = {struct.pack('>I4', seq), fp, '', ''}
  if own then flags = bor(flags, F_INDEXED); parts[#parts + 1] = struct.pack('>I4', own) end
  if canon then flags = bor(flags, F_MEMBER); parts[#parts + 1] = struct.pack('>I4', canon) end
  if prev then flags = bor(flags, F_PREV); parts[#parts + 1] = prev end
  parts[#parts + 1] = first
  if seen ~= first then flags = bor(flags, F_LAST); parts[#parts + 1] = seen end
  parts[3] = string.char(flags)
  parts[4] = string.char(step7 and dist + D_CONTAINMENT or dist)
  parts[#parts + 1] = payload
  local record = table.concat(parts)
  if not sharded then redis.call('HSET', key, field, record) end
  local parts_out, has = {'', ''}, 0
  local cwhere  -- with shards: the canonical's bucket and log position (packed)
  if canon then
    local cfp, cpayload
    cfp, cpayload, cwhere = canonical_of(canon)
    has = PART_CANONICAL
    parts_out[#parts_out + 1] = cfp
    if cpayload then
      has = has + PART_PAYLOAD
      parts_out[#parts_out + 1] = struct.pack('>I4', #cpayload) .. cpayload
    end
  end
  if prev then
    has = has + PART_PREVIOUS
    parts_out[#parts_out + 1] = prev .. prevseen
  end
  if sharded then
    has = has + PART_RECORD
    parts_out[#parts_out + 1] = struct.pack('>I4', #record) .. record
    if cwhere then
      has = has + PART_BUCKET
      parts_out[#parts_out + 1] = cwhere
    end
  end
  if hinted then has = has + PART_HINT end
  parts_out[1] = struct.pack('>BBI4B', outcome, has, seq, dist)
  out[#out + 1] = table.concat(parts_out)
end
if delta ~= 0 then redis.call('HINCRBY', KEYS[2], 'canonicals', delta) end
local tail = ''
if loglen > sync then tail = redis.call('GETRANGE', KEYS[3], sync * ENTRY, loglen * ENTRY - 1) end
local ttl = tonumber(ARGV[5])
if ttl > 0 then
  for i = 1, #KEYS do redis.call('PEXPIRE', KEYS[i], ttl) end
end
local xsync, xtail = tonumber(ARGV[10]), ''
if xsync >= 0 then
  local xlen = redis.call('STRLEN', KEYS[4])
  if xlen > xsync then xtail = redis.call('GETRANGE', KEYS[4], xsync, xlen - 1) end
end
return {tail, table.concat(out), epoch, tonumber(redis.call('HGET', KEYS[2], 'records') or '0'), xtail}
