-- Claim up to ARGV[8] ready jobs for ARGV[9] seconds; ARGV[10]: the claims set's
-- lifetime ('' = none); ARGV[11]: most deliveries of one job ('' = no limit).
-- ARGV[12], if given, is an element a blocking BLMOVE already moved to the
-- processing list: it is claimed first. A suspect is claimed before anything else,
-- and alone: the pool runs it once its other handlers are done.
-- A paused queue claims nothing: what a BLMOVE moved goes back in its turn, and the
-- reply is {{}, '', 'paused'} ({{}, '', '', '', 'paused'} for a stream source).
-- Under a queue rate limit (RATE) a claim takes no more jobs than it allows now; when
-- it allows none, what a BLMOVE moved goes back, and the reply is {{}, seconds until
-- it allows one, 'limited'} ({{}, '', '', those seconds, 'limited'} for a stream).
-- Under a per-key limit (KEY_RATE), a job over its rate key's limit goes back to wait
-- for the start its key gives it (see key_allows), and the claim goes on to others.
-- Returns {rows, seconds until the next stored job is due ('' for none)}, each row
-- {id, payload, attempts, token, ready at, '1' for a suspect, the job's options, its
-- priority ('' for 0)}; for a stream source
-- {rows, the ids to wait after for new entries in the stream and in its wake stream
-- (both '' when rows came), seconds until the next due}.
-- Jobs whose due time came go on the ready list first (fill), so they are claimed now.
-- A stream source claims jobs to deliver again (the ready list) first, then new
-- entries (XREADGROUP, which takes them into the group's pending list as this
-- consumer's, in the same step as the claim: no entry is read and left unclaimed).
-- Ready jobs are taken from the highest priority's list that holds one, oldest first.
-- A claim takes the job off the ready list and records its lease in the claims set,
-- in both modes; the modes differ in what becomes of a claim whose lease runs out.
-- At most CLAIM_SLICE jobs per call (a claim runs about ten commands a job: 100 take
-- Redis a few milliseconds); a caller that wants more calls again.
local CLAIM_SLICE = 100
local max = math.min(tonumber(ARGV[8]), CLAIM_SLICE)
local lease, ttl = tonumber(ARGV[9]), tonumber(ARGV[10])
local max_deliveries, given = tonumber(ARGV[11]), ARGV[12]
local out = {}
touch()
if PAUSED then
  if given then put_back(given) end
  if K_STREAM then return {out, '', '', '', 'paused'} end
  return {out, '', 'paused'}
end

local rate_tat = RATE_TAT or 0
if RATE then
  local allowed = rate_room(rate_tat, RATE)
  if allowed == 0 then
    if given then put_back(given) end
    local wait = exact(rate_start_at(rate_tat, RATE) - NOW)
    if K_STREAM then return {out, '', '', wait, 'limited'} end
    return {out, wait, 'limited'}
  end
  max = math.min(max, allowed)
end
-- The reply, once the queue's limit is charged for the jobs claimed.
local function charged(reply)
  if RATE and #out > 0 then
    redis.call('HSET', K_CONF, 'rate_tat', exact(rate_charge(rate_tat, RATE, #out)))
  end
  return reply
end

-- How many jobs of rate key rate_key, enqueued before order, another consumer's BLMOVE
-- moved to the processing list with their claims not registered yet: they go ahead,
-- as they would had their claims come first. The list holds only such landings, one
-- per consumer waiting at most (the first 32 are looked at).
local function landed_ahead(rate_key, order)
  order = tonumber(order)
  if not order then return 0 end
  local ahead = 0
  for _, element in ipairs(redis.call('LRANGE', K_PROC, 0, 31)) do
    if string.sub(element, 1, 1) == MARK then
      local other = redis.call('HMGET', jobkey(string.sub(element, 2)), 'rk', 'ro')
      if other[1] == rate_key and (tonumber(other[2]) or order) < order then
        ahead = ahead + 1
      end
    end
  end
  return ahead
end

-- Whether the job may start under its rate key's limit, as trioqueue/_rate.py's
-- KeyLine.turn: if the limit has room for it and for every job ahead of it in its
-- key's line, or on its way to a claim (landed_ahead). If not, it takes its place in
-- the line (or keeps the one it holds: 'rr' on its record) and waits (scheduled, or
-- still failed_retry for a retry) until its turn should come: after the next free
-- start, one interval more for each job ahead. A suspect takes no place (it stays a
-- suspect, put back by the caller).
local function key_allows(id, key, state, suspect)
  local fields = redis.call('HMGET', key, 'rk', 'rr', 'ro')
  local rate_key = fields[1]
  if not rate_key then return true end
  local line = RATE_LINE_PREFIX .. rate_key
  local started = key_times(rate_key)
  local ahead = line_ahead(line, id, fields[3]) + landed_ahead(rate_key, fields[3])
  if rate_room(started, KEY_RATE) > ahead then
    if fields[2] then unpromise(id, rate_key) end
    keep_key_times(rate_key, rate_charge(started, KEY_RATE, 1))
    return true
  end
  if suspect then return false end
  line_join(line, id, fields[3])
  keep_key_times(rate_key, started)
  redis.call('HSET', key, 'rr', '1')
  if state == 'received' then redis.call('HSET', key, 's', 'scheduled') end
  defer(id, rate_start_at(math.max(started, NOW) + ahead * KEY_RATE[1], KEY_RATE))
  return false
end

-- Claim the job an element (off a ready list, the suspects, or a landing) names;
-- fresh: a stream entry this script just read (its pending entry is this consumer's);
-- priority: the level of the ready list it came from, for another client's push.
local held_suspect  -- a suspect over its key's limit: it stays first among the suspects
local function take(element, fresh, priority, suspect)
  if element == WAKE then
    wake_taken()  -- it woke this consumer: the claim's reply says when the next is due
    return
  end
  if expired_reference(element) then
    count('expired')
    return
  end
  local id = string.sub(element, 2)
  if string.sub(element, 1, 1) ~= MARK or redis.call('EXISTS', jobkey(id)) == 0 then
    -- pushed by another client (binary payloads may start with the mark byte too)
    id = adopt(element)
    if not id then return end
    if priority and priority ~= 0 then redis.call('HSET', jobkey(id), 'pr', priority) end
  end
  local key = jobkey(id)
  local token_now = redis.call('HGET', key, 't')
  if token_now and token_now ~= '' then
    -- a second reference to a job someone holds a live claim on: nothing to run
    count('stale')
    return
  end
  local state = redis.call('HGET', key, 's')
  if state == 'cancelled' then return end  -- a landing of a job cancelled since
  if redis.call('HGET', key, 'cx') then
    -- a stream entry of a job cancelled before its group read it: it ends now
    cancel_now(id, 'cancelled while it waited for a worker')
    return
  end
  if state ~= 'received' and state ~= 'failed_retry' then
    -- a reference whose job is gone or already finished: nothing to run
    count('stale')
    return
  end
  -- a job about to be dead-lettered for max_deliveries (below) takes no start
  if KEY_RATE and not (max_deliveries and unanswered(id) >= max_deliveries)
    and not key_allows(id, key, state, suspect) then
    if suspect then held_suspect = id end
    return
  end
  -- every claim is a delivery, except one a clean shutdown gave back (see release)
  local deliveries = redis.call('HINCRBY', key, 'd', 1)
  -- only deliveries without an outcome: a failed attempt that was retried is not one
  if max_deliveries and unanswered(id) > max_deliveries then
    -- a poison job: its handler keeps killing its worker (or it never finishes)
    local late = tonumber(redis.call('HGET', key, 'l') or '0')
    local why = 'its handler may be killing the worker'
    if late > 0 then
      why = late .. ' of its runs finished after their lease ran out: a handler that '
        .. 'blocks the event loop (time.sleep, CPU-bound work) stops its pool renewing; run '
        .. 'such work with trio.to_thread.run_sync'
    end
    dead_now(id, 'delivered ' .. max_deliveries .. ' times (max_deliveries) without an '
      .. 'outcome each time: ' .. why .. '; fix that, then requeue it')
    fail_followers(id, ENDED_HOW.failed)
    return
  end
  local entry = K_STREAM and not fresh and redis.call('HGET', key, 'e')
  if entry then
    -- the entry becomes this consumer's in the group, with the true delivery count
    redis.call('XCLAIM', K_STREAM, GROUP, CONSUMER, 0, entry, 'RETRYCOUNT', deliveries, 'JUSTID')
  end
  local token = tostring(redis.call('INCR', K_SEQ))
  redis.call('HSET', key, 's', 'processing', 'q', 0, 't', token, 'u', stamp(NOW),
    'k', stamp(NOW))
  hold(id, lease)
  if KEY_TTL_MS then  -- a claimed job never expires
    redis.call('PERSIST', key)
    unkeep(id)
  end
  local rec = redis.call('HMGET', key, 'p', 'a', 'r', 'o', 'pr')
  out[#out + 1] = {id, rec[1], rec[2], token, rec[3], '0', rec[4] or '', rec[5] or ''}
end

if not given then
  while #out == 0 do  -- a suspect dead-lettered for max_deliveries makes room for the next
    local id = redis.call('RPOP', K_SUS)
    if not id then break end
    take(MARK .. id, false, nil, true)
    if held_suspect then
      redis.call('RPUSH', K_SUS, id)  -- first again: the claim goes on to other jobs
      break
    end
  end
  if #out > 0 then
    out[1][6] = '1'
    expire_claims(ttl, lease)
    if K_STREAM then return charged({out, '', '', ''}) end
    return charged({out, ''})
  end
end
fill()

-- only if it is still there: the sweeper may have put it back meanwhile. A BLMOVE
-- takes from priority 0's list: while a higher level holds jobs, what it moved goes
-- back next in line, and the higher jobs are claimed first.
if given and unland(given) then
  if given ~= WAKE and (redis.call('LLEN', LEVELS[1]) > 0 or redis.call('LLEN', LEVELS[2]) > 0) then
    redis.call('RPUSH', K_READY, given)
  else
    take(given)
  end
end
-- at most CLAIM_SLICE looked at: jobs over their rate key's limit are looked at and go
-- back, at about as many commands each as a claim
local looked = 0
for i, level in ipairs(LEVELS) do
  while #out < max and looked < CLAIM_SLICE do
    local element = redis.call('RPOP', level)
    if not element then break end
    looked = looked + 1
    take(element, false, 3 - i)
  end
end
if not K_STREAM then
  fill()
  wake_for_levels()  -- jobs left on another level: the next waiting consumer wakes
  expire_claims(ttl, lease)
  local due_in = ''
  if #out == 0 then
    -- all it looked at went back to wait, and more may be ready: ask again at once
    due_in = looked == CLAIM_SLICE and '0' or next_due_in()
  end
  return charged({out, due_in})
end
if #out < max then
  ensure_group()
  local args = {'XREADGROUP', 'GROUP', GROUP, CONSUMER, 'COUNT', max - #out, 'STREAMS', K_STREAM,
    '>'}
  local read = redis.pcall(unpack(args))
  if type(read) == 'table' and read.err then
    if not string.find(read.err, 'NOGROUP') then error(read.err) end
    ensure_group(true)  -- deleted by hand: made again
    read = redis.call(unpack(args))
  end
  for _, found in ipairs(read and read[1][2] or {}) do
    local id = entry_job(found[1], found[2], 0)
    if id then take(MARK .. id, true) end
  end
end
fill()
expire_claims(ttl, lease)
local after, wake_after, due_in = '', '', ''
if #out == 0 then
  local last = redis.call('XREVRANGE', K_STREAM, '+', '-', 'COUNT', 1)[1]
  after = last and last[1] or '0-0'
  last = redis.call('XREVRANGE', K_WAKE, '+', '-', 'COUNT', 1)[1]
  wake_after = last and last[1] or '0-0'
  due_in = next_due_in()
end
return charged({out, after, wake_after, due_in})
