-- Shared by every trioqueue script. All keys of a queue share one hash slot.
-- KEYS: ready, processing, claims, dead, unqueued, finished, stats, sequence, config,
--       suspects, held, retrying, scheduled, events, the ready lists of priorities
--       +2, +1, -1 and -2, expiry; for a stream source also the stream and its wake
--       stream
-- ARGV: job key prefix, clock ('' = the server's TIME), capacity,
--       retention count ('' = none), retention age ('' = none), mode ('reliable' or
--       'simple'), key TTL in seconds ('' = none), then taken out here: the caller's
--       min_idle, and for a stream source its group, consumer, group start ('$' or
--       '0') and '1' to delete entries once done ('' for a list queue); then the
--       script's own from ARGV[8].
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
-- Jobs waiting for their due time (delayed jobs), scored by it on the server's clock.
local K_SCHED = KEYS[13]
-- The ids of finished jobs someone waits for (see ended), read by RedisBackend.finished.
local K_EVENTS = KEYS[14]
-- The ready lists by priority, highest first; K_READY is priority 0's. A claim takes
-- the first that holds a job. A consumer waiting for work blocks on K_READY alone,
-- so a job put on another level when K_READY is empty pushes the wake element there
-- (see wake_for_levels).
local LEVELS = {KEYS[15], KEYS[16], K_READY, KEYS[17], KEYS[18]}
-- With a key TTL: the waiting jobs' ids, scored by when their records expire (see keep)
local K_EXP = KEYS[19]
-- Every key a script uses must hold what trioqueue puts there (or nothing yet): a key
-- changed by hand is refused here, before any write, never half-way through a script.
-- CHECKED (set ahead of this prelude) names the keys a script uses, by position, when
-- it uses fewer than all (each TYPE costs a hot script several per cent of its time).
local KINDS = {'list', 'list', 'zset', 'list', 'list', 'zset', 'hash', 'string', 'hash', 'list',
  'zset', 'set', 'zset', 'stream', 'list', 'list', 'list', 'list', 'zset'}
local checked = CHECKED or {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}
if KEYS[20] then
  KINDS[20], KINDS[21] = 'stream', 'stream'
  checked[#checked + 1], checked[#checked + 2] = 20, 21
end
for _, i in ipairs(checked) do
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= KINDS[i] then
    return redis.error_reply('TRIOQUEUE_KEY ' .. KEYS[i] .. ' holds a ' .. found
      .. ', where this queue keeps a ' .. KINDS[i])
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
-- A stream source: jobs come from K_STREAM through consumer group GROUP, which this
-- process reads as CONSUMER; the ready list holds only jobs to deliver again.
local K_STREAM, K_WAKE = KEYS[20], KEYS[21]
local GROUP = table.remove(ARGV, 8)
local CONSUMER = table.remove(ARGV, 8)
local GROUP_START = table.remove(ARGV, 8)
local DELETE_DONE = table.remove(ARGV, 8) == '1'
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
local agreed = redis.call('HMGET', K_CONF, 'capacity', 'mode', 'key_ttl', 'wake', 'source',
  'born')
-- A stream's group keeps its keys under '<stream>:<group>', the names a list queue of
-- that name has too: the keys belong to the kind of source that wrote first.
local SOURCE = KEYS[20] and 'stream' or 'list'
if agreed[5] and agreed[5] ~= SOURCE then
  return redis.error_reply('TRIOQUEUE_SOURCE ' .. agreed[5])
end
if agreed[1] and not agreed[5] and not READ_ONLY then
  redis.call('HSET', K_CONF, 'source', SOURCE)  -- a queue from before sources were stored
end
if agreed[1] then
  CAPACITY = tonumber(agreed[1])
  SIMPLE = agreed[2] == 'simple'
  KEY_TTL_MS = nil
  if agreed[3] and agreed[3] ~= '' then KEY_TTL_MS = math.ceil(tonumber(agreed[3]) * 1000) end
elseif not READ_ONLY then
  redis.call('HSET', K_CONF, 'capacity', ARGV[3], 'mode', ARGV[6], 'key_ttl', ARGV[7],
    'source', SOURCE, 'born', string.format('%.6f', NOW))
end
-- When the queue's settings were stored: a queue with a key TTL that expired unfed
-- is born again, and a record made before then belongs to its earlier life (see
-- add.lua). None for a queue from before this was stored.
local BORN = tonumber(agreed[6]) or (not agreed[1] and NOW) or nil
-- A stream has no capacity: XADD never waits, and nothing bounds redeliveries.
if K_STREAM then CAPACITY = math.huge end
-- List elements that reference a job record start with this byte; anything else
-- was pushed by another client and is the payload itself.
local MARK = '\0'
-- The mark alone is no job: it is the wake element (see defer), which the ready list
-- holds at most once, while the config hash's 'wake' says so; it takes no room.
local WAKE = MARK
local woken = agreed[4] == '1'

-- Whether the wake element is one a BLMOVE moved to the processing list (a few
-- elements), whose consumer's claim is coming: then the ready list does not hold it.
-- There is never more than one: none is pushed while one exists (see wake_for_levels).
local function wake_landed()
  return woken and redis.call('LPOS', K_PROC, WAKE) ~= false
end

-- Jobs on each ready list, highest priority first (the wake element is not one).
local function level_lengths()
  local lengths = {}
  for i, k in ipairs(LEVELS) do lengths[i] = redis.call('LLEN', k) end
  if woken and lengths[3] > 0 and not wake_landed() then lengths[3] = lengths[3] - 1 end
  return lengths
end

-- Jobs on the ready lists, every priority together: the capacity bounds them.
local function ready_len()
  local n = 0
  for _, length in ipairs(level_lengths()) do n = n + length end
  return n
end

local function jobkey(id) return PREFIX .. id end

-- The ready list of a job's priority (its record's 'pr'; none is 0).
local function level_of(id)
  local priority = tonumber(redis.call('HGET', jobkey(id), 'pr') or '0') or 0
  return LEVELS[3 - priority] or K_READY
end

-- Consumers waiting for work block on K_READY alone: when it is empty while another
-- level holds jobs, the wake element goes there, so one of them wakes and claims
-- (claim.lua calls this again when it leaves jobs behind: the next one wakes too).
local function wake_for_levels()
  -- a consumer waits only on an empty K_READY; and one whose BLMOVE took the wake
  -- element will claim anyway (a second element would be counted as a job)
  if K_STREAM or redis.call('LLEN', K_READY) > 0 or wake_landed() then return end
  for i, k in ipairs(LEVELS) do
    if i ~= 3 and redis.call('LLEN', k) > 0 then
      redis.call('LPUSH', K_READY, WAKE)
      redis.call('HSET', K_CONF, 'wake', '1')
      woken = true
      return
    end
  end
end
-- Whether a job in state is finished: completed, dropped, dead-lettered or cancelled.
local FINISHED_STATES = {completed = true, dropped = true, failed = true, cancelled = true}
local function is_finished(state) return FINISHED_STATES[state] == true end
local function count(field, n)
  if (n or 1) ~= 0 then redis.call('HINCRBY', K_STATS, field, n or 1) end
end
local function stamp(n) return string.format('%.6f', n) end
-- The deliveries of a job that ended without an outcome (its worker died or lost the
-- lease): every claim counts one ('d'), every recorded outcome of an attempt one back
-- ('a'), so a handler that fails and is retried never looks like one killing workers.
local function unanswered(id)
  local fields = redis.call('HMGET', jobkey(id), 'd', 'a')
  return (tonumber(fields[1]) or 0) - (tonumber(fields[2]) or 0)
end
-- A job's life starts when it is enqueued or requeued from the dead letters: claims
-- numbered up to the last token given so far belong to earlier lives (its 'lf').
local function life_from() return redis.call('GET', K_SEQ) or '0' end

-- With a key TTL, a waiting job's record lives as long as its queue, as seed 001 asks
-- (a list's TTL covers all it holds). Pushing every record's expiry on at each feed
-- would cost a write per waiting job; instead a record expires two key TTLs after it
-- was last kept (after its due time, for a delayed job), and each feed keeps again
-- the records that would expire within one key TTL: a record is rewritten at most
-- once per key TTL, and none expires while its queue lives. K_EXP lists them.
local function keep(id, after_ms)
  local ms = (after_ms or 0) + 2 * KEY_TTL_MS
  redis.call('PEXPIRE', jobkey(id), ms)
  redis.call('ZADD', K_EXP, NOW + ms / 1000, id)
end

-- Keep the queue's own keys alive KEY_TTL from now (a push feeds the queue), and the
-- waiting jobs' records at least as long (see keep).
local function feed()
  if not KEY_TTL_MS then return end
  -- not the counters (they must outlive claimed jobs and dead letters) nor the
  -- claim-token sequence (tokens must never repeat): two small keys stay behind
  for _, k in ipairs({K_UNQ, K_FIN, K_CONF, K_EXP, unpack(LEVELS)}) do
    redis.call('PEXPIRE', k, KEY_TTL_MS)
  end
  -- the delayed jobs' set may have to outlive the queue (see defer), never the reverse
  if redis.call('PTTL', K_SCHED) < KEY_TTL_MS then redis.call('PEXPIRE', K_SCHED, KEY_TTL_MS) end
  -- every record due to expire before the queue now would: each is rewritten at most
  -- once per key TTL, however many come due together (a burst of jobs, one TTL ago)
  local before = NOW + KEY_TTL_MS / 1000
  repeat
    local soon = redis.call('ZRANGEBYSCORE', K_EXP, '-inf', before, 'LIMIT', 0, 1000)
    for _, id in ipairs(soon) do
      if redis.call('EXISTS', jobkey(id)) == 1 then keep(id) else redis.call('ZREM', K_EXP, id) end
    end
  until #soon < 1000
end

-- A job no longer waits (claimed, or finished): its record no longer goes with the
-- queue's key TTL.
local function unkeep(id)
  if KEY_TTL_MS then redis.call('ZREM', K_EXP, id) end
end

-- Put a job on the ready list if there is room, else store it unqueued; at the
-- back (LPUSH: claims take from the right), or next in line when front is true
-- (a job given back: it was taken in its turn already). A caller that knows them
-- passes the jobs on the ready lists (ready) and the job's ready list (level).
local function schedule(id, front, ready, level)
  local key = jobkey(id)
  local push = front and 'RPUSH' or 'LPUSH'
  if K_STREAM then
    -- consumers waiting for new entries wait on the wake stream too
    redis.call('XADD', K_WAKE, 'MAXLEN', 1, '*', 'ready', id)
  end
  if (ready or ready_len()) < CAPACITY then
    level = level or level_of(id)
    redis.call(push, level, MARK .. id)
    redis.call('HSET', key, 'q', 1, 'r', stamp(NOW), 'u', stamp(NOW))
    if KEY_TTL_MS then keep(id) end
    feed()
    if level ~= K_READY then wake_for_levels() end  -- K_READY's own push wakes a consumer
    return 1
  end
  redis.call(push, K_UNQ, id)
  redis.call('HSET', key, 'q', 0, 'r', stamp(NOW), 'u', stamp(NOW))
  if KEY_TTL_MS then keep(id) end
  feed()
  return 0
end

-- Most elements one script moves or examines per loop: a sweep, a fill or a purge
-- of many does the rest in later calls, so no call holds Redis for long.
local SLICE = 1000

-- Move jobs whose due time came onto the ready list, in due order, while it has room
-- (a due job that finds none stays stored until room frees), at most budget of them.
-- Returns how many moved, and whether due jobs and room are left for another call.
local function promote(budget)
  local due = redis.call('ZRANGEBYSCORE', K_SCHED, '-inf', NOW, 'WITHSCORES', 'LIMIT', 0, budget)
  local moved, room = 0, CAPACITY - ready_len()
  for i = 1, #due, 2 do
    if room <= 0 then return moved, false end  -- the rest wait for room
    local id, when = due[i], tonumber(due[i + 1])
    local key = jobkey(id)
    redis.call('ZREM', K_SCHED, id)
    if redis.call('EXISTS', key) == 0 then
      count('expired')  -- its record outlived its due time by the key TTL
    else
      if redis.call('HGET', key, 's') == 'scheduled' then redis.call('HSET', key, 's', 'received') end
      redis.call('HDEL', key, 'due')
      -- its wait counts from its due time, so lateness shows in the queue_wait latency
      redis.call('HSET', key, 'q', 1, 'r', stamp(when), 'u', stamp(NOW))
      redis.call('LPUSH', level_of(id), MARK .. id)
      if KEY_TTL_MS then keep(id) end
      if K_STREAM then redis.call('XADD', K_WAKE, 'MAXLEN', 1, '*', 'ready', id) end
      moved, room = moved + 1, room - 1
    end
  end
  if moved > 0 then
    feed()
    wake_for_levels()
  end
  return moved, #due == 2 * budget
end

-- Move stored jobs into free room on the ready list, oldest first, then due ones, at
-- most SLICE looked at. Returns how many stored jobs moved, whether stored or due
-- jobs and room are left for another call, and how many due jobs moved.
local function fill()
  local moved, looked, room = 0, 0, CAPACITY - ready_len()
  while room > 0 do
    if looked == SLICE then
      if moved > 0 then
        feed()
        wake_for_levels()
      end
      return moved, redis.call('LLEN', K_UNQ) > 0, 0
    end
    looked = looked + 1
    local id = redis.call('RPOP', K_UNQ)
    if not id then break end
    if KEY_TTL_MS and redis.call('EXISTS', jobkey(id)) == 0 then
      count('expired')  -- it waited longer than the key TTL
    else
      redis.call('LPUSH', level_of(id), MARK .. id)
      redis.call('HSET', jobkey(id), 'q', 1, 'r', stamp(NOW))
      moved, room = moved + 1, room - 1
    end
  end
  if moved > 0 then
    feed()
    wake_for_levels()
  end
  local due, more = promote(SLICE)
  return moved, more, due
end

-- Store a job until due (the server's clock). When it is the next due, consumers
-- waiting for work must wait anew, no longer than until then: an empty ready list
-- gets the wake element (a waiting BLMOVE takes it, and its claim sees the new due
-- time); a stream source's wake stream gets an entry.
local function defer(id, due)
  local key = jobkey(id)
  redis.call('ZADD', K_SCHED, due, id)
  redis.call('HSET', key, 'q', 0, 'due', stamp(due), 'u', stamp(NOW))
  if KEY_TTL_MS then
    -- the record and the set live until due, and the key TTL's time beyond
    local until_due = math.ceil((due - NOW) * 1000)
    keep(id, until_due)
    local ms = until_due + 2 * KEY_TTL_MS
    if redis.call('PTTL', K_SCHED) < ms then redis.call('PEXPIRE', K_SCHED, ms) end
  end
  if redis.call('ZRANGE', K_SCHED, 0, 0)[1] ~= id then return end
  if K_STREAM then
    redis.call('XADD', K_WAKE, 'MAXLEN', 1, '*', 'due', id)
  elseif redis.call('LLEN', K_READY) == 0 and not wake_landed() then
    redis.call('LPUSH', K_READY, WAKE)
    redis.call('HSET', K_CONF, 'wake', '1')
    woken = true
  end
end

-- The wake element was taken off the ready list.
local function wake_taken()
  redis.call('HDEL', K_CONF, 'wake')
  woken = false
end

-- Seconds until the next stored job is due ('' when none is stored): how long a
-- consumer may wait for work at most.
local function next_due_in()
  local first = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')
  if not first[1] then return '' end
  return stamp(math.max(0, tonumber(first[2]) - NOW))
end

-- Register a lease on a job: it is claimed until NOW + lease.
local function hold(id, lease)
  redis.call('ZADD', K_CLAIMS, NOW + lease, MARK .. id)
  redis.call('ZADD', K_HELD, NOW, MARK .. id)
end

-- Ends the job's claim; *token*, when its own outcome ends it, is kept as the record's
-- 'lt', so that the same outcome sent again (its reply was lost) is told from a stale one.
local function unclaim(id, token)
  -- the processing list is tiny, except right after an upgrade from the layout that
  -- kept every reliable claim there: then this removes the job's old entry
  redis.call('LREM', K_PROC, 1, MARK .. id)
  redis.call('ZREM', K_CLAIMS, MARK .. id)
  redis.call('ZREM', K_HELD, MARK .. id)
  redis.call('SREM', K_RETRY, id)
  redis.call('HSET', jobkey(id), 't', '', 'lt', token or '')
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
    if element ~= WAKE and not redis.call('ZSCORE', K_CLAIMS, element) then
      landed = landed + 1
    end
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

-- A job finished (completed, dropped, dead-lettered). When someone waits for it
-- (watch.lua marked its record), its id goes on the events stream, where each
-- process's waiters read it; the newest EVENTS_KEPT or so are kept, an hour after
-- the last. A waiter that missed one finds the job finished when it looks again.
local EVENTS_KEPT = 10000
local function ended(id)
  if redis.call('HGET', jobkey(id), 'wt') then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_KEPT, '*', 'id', id)
    redis.call('EXPIRE', K_EVENTS, 3600)
  end
end

-- Delete a record the retention lets go, unless it is no longer finished (its TTL
-- ran out and the id was enqueued again: the new job is live).
local function forget_finished(id)
  local state = redis.call('HGET', jobkey(id), 's')
  if is_finished(state) and state ~= 'failed' then redis.call('DEL', jobkey(id)) end
end

-- Keep a finished job's record only as long as the retention allows.
local function finished(id)
  redis.call('ZADD', K_FIN, NOW, id)
  unkeep(id)
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

-- --- stream sources -------------------------------------------------------------

-- Create the group if it was never made here: from GROUP_START ('$': entries added
-- from now on; '0': the whole stream), or from the start when it existed before and
-- was deleted by hand (its position is lost; better twice than never).
local function ensure_group(again)
  if not again and redis.call('HGET', K_CONF, 'group') == '1' then return end
  local made = redis.pcall('XGROUP', 'CREATE', K_STREAM, GROUP, again and '0' or GROUP_START,
    'MKSTREAM')
  if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP') then
    error(made.err)
  end
  redis.call('HSET', K_CONF, 'group', '1')
end

-- A job that came from the stream is done (completed, dropped or dead-lettered):
-- acknowledge its entry, and delete it if asked to.
local function entry_done(id)
  if not K_STREAM then return end
  local entry = redis.call('HGET', jobkey(id), 'e')
  if not entry then return end
  redis.call('XACK', K_STREAM, GROUP, entry)
  if DELETE_DONE then redis.call('XDEL', K_STREAM, entry) end
end

-- The job an entry carries. An entry trioqueue added (fields id, payload, hash; the id
-- not empty) is the job of that id, in every group that reads it; any other entry is a job whose
-- id is the entry's, and whose payload is the entry: its fields as an object of
-- strings. (A trioqueue entry whose id this group already gave another entry gets
-- the entry's id too.) deliveries: how often the group delivered the entry already.
-- Returns the id (nil when the payload does not decode: it is then a dead letter
-- with the reason), and whether the job is new here.
local function entry_job(entry, fields, deliveries)
  local named = {}
  for i = 1, #fields, 2 do named[fields[i]] = fields[i + 1] end
  local id, payload, hash = named['id'], named['payload'], named['hash']
  local ours = #fields == 6 and id and id ~= '' and payload and hash  -- '' is no job's id
  if ours then
    local seen = redis.call('HGET', jobkey(id), 'e')
    if seen == entry then return id, false end  -- enqueued through this group, or adopted
    if seen then ours = false end
  end
  if not ours then
    id = entry
    if redis.call('EXISTS', jobkey(id)) == 1 then return id, false end  -- adopted before
    payload = cjson.encode(named)
    hash = 'raw:' .. redis.sha1hex(payload)
  end
  local key = jobkey(id)
  redis.call('ZREM', K_FIN, id)
  redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0, 'd', deliveries,
    'q', 1, 'c', stamp(NOW), 'u', stamp(NOW), 'r', stamp(NOW), 't', '', 'lf', life_from(),
    'e', entry)
  count('enqueued')
  local ok, err = pcall(cjson.decode, payload)
  if not ok then
    redis.call('HSET', key, 's', 'failed', 'q', 0, 'w',
      'undecodable record: not JSON (' .. tostring(err) .. ')')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    entry_done(id)
    return nil, true
  end
  return id, true
end

-- Entries of the stream the group has not read yet (its lag): what waits to be
-- claimed, besides the ready list. When Redis cannot tell (entries deleted in the
-- range), count them, up to SLICE.
local function stream_waiting()
  if not K_STREAM or redis.call('EXISTS', K_STREAM) == 0 then return 0 end
  local groups = redis.call('XINFO', 'GROUPS', K_STREAM)
  for _, group in ipairs(groups) do
    local info = {}
    for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
    if info['name'] == GROUP then
      if info['lag'] then return tonumber(info['lag']) end
      return #redis.call('XRANGE', K_STREAM, '(' .. info['last-delivered-id'], '+', 'COUNT',
        SLICE)
    end
  end
  -- no group yet: from '$' nothing there now will be read; one deleted by hand is
  -- made again from the start (ensure_group)
  local again = redis.call('HGET', K_CONF, 'group') == '1'
  return (again or GROUP_START == '0') and redis.call('XLEN', K_STREAM) or 0
end

-- Entries the group has delivered and nobody acknowledged yet: every stream job
-- claimed or waiting to run again, and entries another program's consumer read and
-- left (taken over by the sweep once idle for a lease).
local function stream_pending()
  if not K_STREAM or redis.call('EXISTS', K_STREAM) == 0 then return 0 end
  local found = redis.pcall('XPENDING', K_STREAM, GROUP)
  if type(found) ~= 'table' or found.err then return 0 end  -- no group (yet)
  return tonumber(found[1])
end

-- End a job no claim holds as cancelled (cancel.lua; a cancelled job given back).
local function cancel_now(id, why)
  local key = jobkey(id)
  redis.call('HSET', key, 's', 'cancelled', 'q', 0, 'u', stamp(NOW), 'w', why)
  redis.call('HDEL', key, 'due', 'cx')
  count('cancelled')
  entry_done(id)
  ended(id)
  finished(id)
end
local CANCELLED_HELD = 'cancelled while a worker held it'

-- Return a claimed, unfinished job to the queue without counting an attempt: next
-- in line when front (a live pool gave it back, or its owner died: it was taken in
-- its turn already), else at the back. suspect: put it among the suspects instead,
-- each of which is claimed alone. A job waiting to retry whose due time is ahead
-- (settle.lua's retry) is stored until then instead: it waits out its backoff (it was
-- not running, so it cannot be what killed its worker).
local function putback(id, front, suspect)
  local key = jobkey(id)
  unclaim(id)
  local state = redis.call('HGET', key, 's')
  if state == 'cancelled' then return end  -- a BLMOVE's landing of a job cancelled since
  if redis.call('HGET', key, 'cx') then
    cancel_now(id, CANCELLED_HELD)  -- cancelled while claimed: it ends here
    return
  end
  if state == 'processing' then
    local attempts = tonumber(redis.call('HGET', key, 'a'))
    redis.call('HSET', key, 's', attempts > 0 and 'failed_retry' or 'received')
  elseif state == 'failed_retry' then
    local due = tonumber(redis.call('HGET', key, 'due') or '')
    if due and due > NOW then
      defer(id, due)
      return
    end
  end
  redis.call('HDEL', key, 'due')
  if suspect then
    redis.call('LPUSH', K_SUS, id)
    redis.call('HSET', key, 'q', 0, 'r', stamp(NOW), 'u', stamp(NOW))
  else
    schedule(id, front)
  end
end
