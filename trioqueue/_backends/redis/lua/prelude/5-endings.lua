-- Prelude, part 5: jobs that run after others, cancelling a job, and putting a
-- claimed job back.

-- A job enqueued to run after others (add.lua) is 'deferred' until they complete: its
-- record's 'dw' counts those that have not, 'dp' lists them all (JSON), and each of
-- them has a field 'f:' .. its id until it ends, and counts such fields in 'df' (so a
-- job nobody follows costs its ending one HGET). How a job that did not complete
-- ended, as its followers' reasons say it (the memory backend's ENDED_HOW):
local ENDED_HOW = {failed = 'failed (it is a dead letter)', dropped = 'was dropped',
  cancelled = 'was cancelled'}

-- Job follower waits for job id.
local function follow(id, follower)
  local key = jobkey(id)
  if redis.call('HSETNX', key, 'f:' .. follower, '1') == 1 then
    redis.call('HINCRBY', key, 'df', 1)
  end
end

-- The jobs that wait for job id, in the order they came (the deferred set's),
-- taken off its record.
local function take_followers(id)
  local key = jobkey(id)
  if not redis.call('HGET', key, 'df') then return {} end
  local fields = redis.call('HGETALL', key)
  local followers, came = {}, {}
  for i = 1, #fields, 2 do
    if string.sub(fields[i], 1, 2) == 'f:' then
      local follower = string.sub(fields[i], 3)
      followers[#followers + 1] = follower
      came[follower] = tonumber(redis.call('ZSCORE', K_DEFER, follower)) or 0
    end
  end
  redis.call('HDEL', key, 'df')
  for i = 1, #followers, 500 do  -- unpack takes a few thousand values at most
    local names = {}
    for j = i, math.min(i + 499, #followers) do names[#names + 1] = 'f:' .. followers[j] end
    redis.call('HDEL', key, unpack(names))
  end
  table.sort(followers, function(a, b)
    if came[a] ~= came[b] then return came[a] < came[b] end
    return a < b
  end)
  return followers
end

-- Whether job follower waits for job parent: it is deferred, and parent is among the
-- jobs it runs after. Not so for one that ended since (cancelled, or a dead letter),
-- nor for a newer job of its id that runs after others.
local function waits_for(follower, parent)
  local fields = redis.call('HMGET', jobkey(follower), 's', 'dp')
  if fields[1] ~= 'deferred' or not fields[2] then return false end
  for _, id in ipairs(cjson.decode(fields[2])) do
    if id == parent then return true end
  end
  return false
end

-- Job id completed: each job that waited for it and for nothing else goes on the queue.
local function release_followers(id)
  for _, follower in ipairs(take_followers(id)) do
    local key = jobkey(follower)
    if waits_for(follower, id) and redis.call('HINCRBY', key, 'dw', -1) <= 0 then
      redis.call('ZREM', K_DEFER, follower)
      redis.call('HDEL', key, 'dw')
      redis.call('HSET', key, 's', 'received')
      schedule(follower)  -- or stored for want of room, as a due job
    end
  end
end

-- Make job id a dead letter, for the reason why, without an attempt's outcome (a poison
-- job at its claim, a job after one that did not complete); the caller fails its
-- followers.
local function dead_now(id, why)
  local key = jobkey(id)
  redis.call('HSET', key, 's', 'failed', 'q', 0, 'u', stamp(NOW), 'w', why)
  redis.call('LPUSH', K_DEAD, id)
  if KEY_TTL_MS then  -- a dead letter never expires
    redis.call('PERSIST', key)
    unkeep(id)
  end
  count('dead_lettered')
  entry_done(id)
  ended(id)
end

-- Make job id, which never ran, a dead letter: job parent, which it was to run after,
-- ended so (how). Its record is deferred, or new (add.lua).
local function dead_at_once(id, parent, how)
  redis.call('ZREM', K_DEFER, id)
  redis.call('HDEL', jobkey(id), 'dw')
  dead_now(id, "it was to run after job '" .. parent .. "', which " .. how
    .. '; requeue it to run it all the same')
end

-- Job id ended without completing (how): the jobs that waited for it become dead
-- letters, and so do the jobs after those, and so on down. A slice of them at once,
-- the rest (after a failed root of a long chain, or of a wide fan-out) at the sweeps
-- that follow: one script never holds Redis for long, whatever the graph's size. Until
-- then they stay deferred, where nothing runs them.
local FAIL_SLICE = 500  -- about fifteen commands each: a slice takes Redis ~10 ms

-- The jobs that waited for job parent, taken off its record, put on top of the
-- followers still to fail, the first that came on top.
local function doom_followers(parent, how)
  local followers = take_followers(parent)
  for i = #followers, 1, -500 do  -- unpack takes a few thousand values at most
    local entries = {}
    for j = i, math.max(i - 499, 1), -1 do
      entries[#entries + 1] = cjson.encode({followers[j], parent, how})
    end
    redis.call('RPUSH', K_FAIL, unpack(entries))
  end
end

-- Make the next of the followers still to fail dead letters, at most budget of them
-- (depth first: a job's followers before its next sibling); whether any are left.
local function fail_pending(budget)
  for _ = 1, budget do
    local entry = redis.call('RPOP', K_FAIL)
    if not entry then return false end
    local follower, parent, how = unpack(cjson.decode(entry))
    if waits_for(follower, parent) then
      dead_at_once(follower, parent, how)
      doom_followers(follower, 'never ran either')
    end
  end
  return redis.call('EXISTS', K_FAIL) == 1
end

local function fail_followers(id, how)
  doom_followers(id, how)
  fail_pending(FAIL_SLICE)
end

-- End a job no claim holds as cancelled (cancel.lua; a cancelled job given back).
local function cancel_now(id, why)
  local key = jobkey(id)
  redis.call('HSET', key, 's', 'cancelled', 'q', 0, 'u', stamp(NOW), 'w', why)
  redis.call('HDEL', key, 'due', 'cx', 'dw')
  redis.call('ZREM', K_DEFER, id)
  count('cancelled')
  entry_done(id)
  ended(id)
  fail_followers(id, ENDED_HOW.cancelled)  -- first: the retention may forget the record
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
    local attempts = tonumber(redis.call('HGET', key, 'a')) or 0  -- changed by hand: none
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
