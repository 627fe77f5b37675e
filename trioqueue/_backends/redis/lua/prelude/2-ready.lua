-- Prelude, part 2: the ready lists and due times (priority levels, the wake
-- element, room on the ready list, storing, promoting and deferring jobs).

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
  -- nor the deferred set and the unique keys: they go with jobs that may be claimed
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
