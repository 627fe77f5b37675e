-- Prelude, part 3: claims and endings (leases, the processing list, finished
-- jobs and the events that announce them).

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

-- Put back what a BLMOVE moved and no claim will take (its caller was cancelled, or
-- the queue is paused): in its turn, at the front of the ready list, or first in line
-- among the stored jobs when producers filled the room it left; unless the sweeper
-- took it already. Returns whether it was put back.
local function put_back(element)
  if not unland(element) then return false end
  local id = string.sub(element, 2)
  if string.sub(element, 1, 1) == MARK and redis.call('EXISTS', jobkey(id)) == 1 then
    schedule(id, true)
  else
    -- another client's push, a job whose record expired, or the wake element: never
    -- counted in the capacity
    redis.call('RPUSH', K_READY, element)
  end
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
-- It also lets the job's unique key go (add.lua), if the job still holds it, and
-- lets the jobs behind it in its rate key's line move up (claim.lua's key_allows).
local function ended(id)
  local marks = redis.call('HMGET', jobkey(id), 'wt', 'uk', 'rr', 'rk')
  if marks[1] then
    redis.call('XADD', K_EVENTS, 'MAXLEN', '~', EVENTS_KEPT, '*', 'id', id)
    redis.call('EXPIRE', K_EVENTS, 3600)
  end
  if marks[2] and redis.call('HGET', K_UNIQUE, marks[2]) == id then
    redis.call('HDEL', K_UNIQUE, marks[2])
  end
  if marks[3] then unpromise(id, marks[4]) end
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
