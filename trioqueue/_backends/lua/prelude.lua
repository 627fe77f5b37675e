-- Shared by every trioqueue script. All keys of a queue share one hash slot.
-- KEYS: ready, processing, claims, dead, unqueued, finished, stats, sequence, config,
--       suspects, held, retrying
-- ARGV: job key prefix, clock ('' = the server's TIME), capacity,
--       retention count ('' = none), retention age ('' = none), mode ('reliable' or
--       'simple'), key TTL in seconds ('' = none), the caller's min_idle (taken out
--       here), then the script's own from ARGV[8].
local K_READY, K_PROC, K_CLAIMS, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_UNQ, K_FIN, K_STATS, K_SEQ, K_CONF = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
-- jobs a dead worker held that had been delivered before: each runs alone
local K_SUS = KEYS[10]
-- Claimed jobs live in the claims set (scored by lease expiry), the held set (scored
-- by claim time: the oldest claim in one step) and, while one waits out a retry
-- backoff, the retrying set. The processing list holds only what a BLMOVE moved and
-- no claim registered yet: a few elements, so no script walks anything that grows
-- with the jobs in flight.
local K_HELD, K_RETRY = KEYS[11], KEYS[12]
-- Every key must hold what trioqueue puts there (or nothing yet): a key changed by
-- hand is refused here, before any write, never half-way through a script.
local KINDS = {'list', 'list', 'zset', 'list', 'list', 'zset', 'hash', 'string', 'hash', 'list',
  'zset', 'set'}
for i, kind in ipairs(KINDS) do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= kind then
    return redis.error_reply('TRIOQUEUE_KEY ' .. KEYS[i] .. ' holds a ' .. found
      .. ', where this queue keeps a ' .. kind)
  end
end
local PREFIX = ARGV[1]
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local CAPACITY = tonumber(ARGV[3])
local KEEP = tonumber(ARGV[4])
local MAX_AGE = tonumber(ARGV[5])
-- A simple queue's claims leave every list; the claims set alone holds their leases.
local SIMPLE = ARGV[6] == 'simple'
-- the caller's lease: it tells how long a silence must be to be an outage (below)
local MIN_IDLE = tonumber(table.remove(ARGV, 8))
-- With a key TTL, every push keeps the queue alive for KEY_TTL more seconds, and a
-- waiting job's record lives that long after it was queued: an unfed queue expires
-- with the jobs in it. Claimed jobs and dead letters never expire.
local KEY_TTL_MS
if ARGV[7] ~= '' then KEY_TTL_MS = math.ceil(tonumber(ARGV[7]) * 1000) end

-- The queue's shared settings live in its config hash: the first script that
-- writes stores the caller's, and from then on every script follows the stored
-- ones, whatever its caller was told (RedisBackend checks a caller's own against
-- them when it connects), so a process keeps working when the queue is configured
-- anew under it (configure.lua).
local SHARED = {'capacity', 'mode', 'key_ttl'}
local agreed = redis.call('HMGET', K_CONF, unpack(SHARED))
if agreed[1] then
  CAPACITY = tonumber(agreed[1])
  SIMPLE = agreed[2] == 'simple'
  KEY_TTL_MS = nil
  if agreed[3] and agreed[3] ~= '' then KEY_TTL_MS = math.ceil(tonumber(agreed[3]) * 1000) end
elseif not READ_ONLY then
  redis.call('HSET', K_CONF, 'capacity', ARGV[3], 'mode', ARGV[6], 'key_ttl', ARGV[7])
end
-- List elements that reference a job record start with this byte; anything else
-- was pushed by another client and is the payload itself.
local MARK = '\0'

local function jobkey(id) return PREFIX .. id end
local function count(field, n)
  if (n or 1) ~= 0 then redis.call('HINCRBY', K_STATS, field, n or 1) end
end
local function stamp(n) return string.format('%.6f', n) end
-- A job's life starts when it is enqueued or requeued from the dead letters: claims
-- numbered up to the last token given so far belong to earlier lives (its 'lf').
local function life_from() return redis.call('GET', K_SEQ) or '0' end

-- Keep the queue's own keys alive KEY_TTL from now (a push feeds the queue).
local function feed()
  if not KEY_TTL_MS then return end
  -- not the counters (they must outlive claimed jobs and dead letters) nor the
  -- claim-token sequence (tokens must never repeat): two small keys stay behind
  for _, k in ipairs({K_READY, K_UNQ, K_FIN, K_CONF}) do
    redis.call('PEXPIRE', k, KEY_TTL_MS)
  end
end

-- Put a job on the ready list if there is room, else store it unqueued; at the
-- back (LPUSH: claims take from the right), or next in line when front is true
-- (a job given back: it was taken in its turn already).
local function schedule(id, front)
  local key = jobkey(id)
  local push = front and 'RPUSH' or 'LPUSH'
  if redis.call('LLEN', K_READY) < CAPACITY then
    redis.call(push, K_READY, MARK .. id)
    redis.call('HSET', key, 'q', 1, 'r', stamp(NOW), 'u', stamp(NOW))
    if KEY_TTL_MS then redis.call('PEXPIRE', key, KEY_TTL_MS) end
    feed()
    return 1
  end
  redis.call(push, K_UNQ, id)
  redis.call('HSET', key, 'q', 0, 'r', stamp(NOW), 'u', stamp(NOW))
  if KEY_TTL_MS then redis.call('PEXPIRE', key, KEY_TTL_MS) end
  feed()
  return 0
end

-- Most elements one script moves or examines per loop: a sweep, a fill or a purge
-- of many does the rest in later calls, so no call holds Redis for long.
local SLICE = 1000

-- Move stored jobs into free room on the ready list, oldest first, at most SLICE.
-- Returns how many moved, and whether stored jobs and room are left for another call.
local function fill()
  local moved, looked = 0, 0
  while redis.call('LLEN', K_READY) < CAPACITY do
    if looked == SLICE then
      if moved > 0 then feed() end
      return moved, redis.call('LLEN', K_UNQ) > 0
    end
    looked = looked + 1
    local id = redis.call('RPOP', K_UNQ)
    if not id then break end
    if KEY_TTL_MS and redis.call('EXISTS', jobkey(id)) == 0 then
      count('expired')  -- it waited longer than the key TTL
    else
      redis.call('LPUSH', K_READY, MARK .. id)
      redis.call('HSET', jobkey(id), 'q', 1, 'r', stamp(NOW))
      moved = moved + 1
    end
  end
  if moved > 0 then feed() end
  return moved, false
end

-- Register a lease on a job: it is claimed until NOW + lease.
local function hold(id, lease)
  redis.call('ZADD', K_CLAIMS, NOW + lease, MARK .. id)
  redis.call('ZADD', K_HELD, NOW, MARK .. id)
end

local function unclaim(id)
  -- the processing list is tiny, except right after an upgrade from the layout that
  -- kept every reliable claim there: then this removes the job's old entry
  redis.call('LREM', K_PROC, 1, MARK .. id)
  redis.call('ZREM', K_CLAIMS, MARK .. id)
  redis.call('ZREM', K_HELD, MARK .. id)
  redis.call('SREM', K_RETRY, id)
  redis.call('HSET', jobkey(id), 't', '')
end

-- Take a BLMOVE's landing out of the processing list, with the stamp the sweeper may
-- have given it; a stamp is the landing's own unless its job is claimed (then the
-- member is the owner's lease). Returns whether the landing was still there.
local function unland(element)
  if redis.call('LREM', K_PROC, 1, element) == 0 then return false end
  local token = string.sub(element, 1, 1) == MARK
    and redis.call('HGET', jobkey(string.sub(element, 2)), 't')
  if not token or token == '' then redis.call('ZREM', K_CLAIMS, element) end
  return true
end

-- Claimed jobs, including what BLMOVEs moved and no claim registered yet (an element
-- the sweeper stamped is in the claims set already).
local function claimed_count()
  local landed = 0
  for _, element in ipairs(redis.call('LRANGE', K_PROC, 0, -1)) do
    if not redis.call('ZSCORE', K_CLAIMS, element) then landed = landed + 1 end
  end
  return redis.call('ZCARD', K_CLAIMS) + landed
end

-- Worker-side scripts call this: a worker reached the queue now. A silence longer
-- than half a lease means nobody could reach it (an outage, a restart, a frozen
-- server) or nobody tried; live owners could not renew meanwhile, so for one lease
-- after it the sweeper gives each expired claim one more lease before it recovers
-- it (see sweep.lua). A dead owner's claims wait that one lease longer.
local function touch()
  local seen = tonumber(redis.call('HGET', K_CONF, 'seen'))
  if seen and NOW - seen > MIN_IDLE / 2 then
    redis.call('HSET', K_CONF, 'quiet_end', stamp(NOW))
  end
  redis.call('HSET', K_CONF, 'seen', stamp(NOW))
end

-- An abandoned queue's claims expire after ttl, never sooner than two leases.
local function expire_claims(ttl, lease)
  if ttl and redis.call('EXISTS', K_CLAIMS) == 1 then
    local seconds = math.ceil(math.max(ttl, 2 * lease))
    for _, k in ipairs({K_CLAIMS, K_HELD, K_RETRY}) do redis.call('EXPIRE', k, seconds) end
  end
end

-- Return a claimed, unfinished job to the queue without counting an attempt: next
-- in line when front (a live pool gave it back, or its owner died: it was taken in
-- its turn already), else at the back. suspect: put it among the suspects instead,
-- each of which is claimed alone.
local function putback(id, front, suspect)
  local key = jobkey(id)
  unclaim(id)
  if redis.call('HGET', key, 's') == 'processing' then
    local attempts = tonumber(redis.call('HGET', key, 'a'))
    redis.call('HSET', key, 's', attempts > 0 and 'failed_retry' or 'received')
  end
  if suspect then
    redis.call('LPUSH', K_SUS, id)
    redis.call('HSET', key, 'q', 0, 'r', stamp(NOW), 'u', stamp(NOW))
  else
    schedule(id, front)
  end
end

-- Delete a record the retention lets go, unless it is no longer finished (its TTL
-- ran out and the id was enqueued again: the new job is live).
local function forget_finished(id)
  local state = redis.call('HGET', jobkey(id), 's')
  if state == 'completed' or state == 'dropped' then redis.call('DEL', jobkey(id)) end
end

-- Keep a finished job's record only as long as the retention allows.
local function finished(id)
  redis.call('ZADD', K_FIN, NOW, id)
  if MAX_AGE then
    redis.call('EXPIRE', jobkey(id), math.max(1, math.ceil(MAX_AGE)))
  elseif KEY_TTL_MS then
    redis.call('PEXPIRE', jobkey(id), KEY_TTL_MS)
  end
  if KEY_TTL_MS then
    -- outlive the records it lists, then go with them
    local ms = math.max(KEY_TTL_MS, math.ceil((MAX_AGE or 0) * 1000))
    redis.call('PEXPIRE', K_FIN, ms)
  end
  if KEEP then
    local excess = redis.call('ZCARD', K_FIN) - KEEP
    if excess > 0 then
      local old = redis.call('ZPOPMIN', K_FIN, excess)
      for i = 1, #old, 2 do forget_finished(old[i]) end
    end
  end
end

-- Turn an element pushed by another client into a job record. Each push is a job
-- of its own (two identical pushes run twice, as a plain list would run them): its
-- id is 'raw-' and the next number of the claim-token sequence (skipping an id a
-- producer chose), its payload hash the SHA-1 of its content. A producer that
-- wants pushes deduplicated gives ids, through the library or `trioqueue enqueue`.
-- Returns the id, or nil when the element does not decode (then it is dead-lettered
-- with the reason).
local function adopt(element)
  local id, key
  repeat
    id = 'raw-' .. redis.call('INCR', K_SEQ)
    key = jobkey(id)
  until redis.call('EXISTS', key) == 0
  redis.call('ZREM', K_FIN, id)
  redis.call('HSET', key, 'p', element, 'h', 'raw:' .. redis.sha1hex(element), 's', 'received',
    'a', 0, 'q', 0, 'c', stamp(NOW), 'u', stamp(NOW), 'r', stamp(NOW), 't', '',
    'lf', life_from())
  count('enqueued')
  local ok, err = pcall(cjson.decode, element)
  if not ok then
    redis.call('HSET', key, 's', 'failed', 'w',
      'undecodable record: not JSON (' .. tostring(err) .. ')')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    return nil
  end
  return id
end

-- Whether an element refers to a job whose record expired with the key TTL: such
-- an element is forgotten and counted, not mistaken for another client's payload.
local function expired_reference(element)
  return KEY_TTL_MS and string.sub(element, 1, 1) == MARK
    and redis.call('EXISTS', jobkey(string.sub(element, 2))) == 0
end
