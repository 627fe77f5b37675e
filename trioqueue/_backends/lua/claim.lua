-- Claim up to ARGV[8] ready jobs for ARGV[9] seconds; ARGV[10]: the claims set's
-- lifetime ('' = none); ARGV[11]: most deliveries of one job ('' = no limit).
-- ARGV[12], if given, is an element a blocking BLMOVE already moved to the
-- processing list: it is claimed first. A suspect is claimed before anything else,
-- and alone: the pool runs it once its other handlers are done.
-- Returns rows {id, payload, attempts, token, ready at, '1' for a suspect}.
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

-- Claim the job an element (off the ready list, the suspects, or a landing) names.
local function take(element)
  if expired_reference(element) then
    count('expired')
    return
  end
  local id = string.sub(element, 2)
  if string.sub(element, 1, 1) ~= MARK or redis.call('EXISTS', jobkey(id)) == 0 then
    -- pushed by another client (binary payloads may start with the mark byte too)
    id = adopt(element)
    if not id then return end
  end
  local key = jobkey(id)
  local token_now = redis.call('HGET', key, 't')
  if token_now and token_now ~= '' then
    -- a second reference to a job someone holds a live claim on: nothing to run
    count('stale')
    return
  end
  local state = redis.call('HGET', key, 's')
  if state ~= 'received' and state ~= 'failed_retry' then
    -- a reference whose job is gone or already finished: nothing to run
    count('stale')
    return
  end
  -- every claim is a delivery, except one a clean shutdown gave back (see release)
  local deliveries = redis.call('HINCRBY', key, 'd', 1)
  if max_deliveries and deliveries > max_deliveries then
    -- a poison job: its handler keeps killing its worker (or it never finishes)
    local late = tonumber(redis.call('HGET', key, 'l') or '0')
    local why = 'its handler may be killing the worker'
    if late > 0 then
      why = late .. ' of its runs finished after their lease ran out: a handler that '
        .. 'blocks the event loop (time.sleep, CPU-bound work) stops its pool renewing; run '
        .. 'such work with trio.to_thread.run_sync'
    end
    redis.call('HSET', key, 's', 'failed', 'q', 0, 'u', stamp(NOW), 'w',
      'delivered ' .. max_deliveries .. ' times (max_deliveries) without an outcome '
      .. 'each time: ' .. why .. '; fix that, then requeue it')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    return
  end
  local token = tostring(redis.call('INCR', K_SEQ))
  redis.call('HSET', key, 's', 'processing', 'q', 0, 't', token, 'u', stamp(NOW),
    'k', stamp(NOW))
  hold(id, lease)
  if KEY_TTL_MS then redis.call('PERSIST', key) end  -- a claimed job never expires
  local rec = redis.call('HMGET', key, 'p', 'a', 'r')
  out[#out + 1] = {id, rec[1], rec[2], token, rec[3], '0'}
end

if not given then
  while #out == 0 do  -- a suspect dead-lettered for max_deliveries makes room for the next
    local id = redis.call('RPOP', K_SUS)
    if not id then break end
    take(MARK .. id)
  end
  if #out > 0 then
    out[1][6] = '1'
    expire_claims(ttl, lease)
    return out
  end
end

-- only if it is still there: the sweeper may have put it back meanwhile
if given and unland(given) then take(given) end
while #out < max do
  local element = redis.call('RPOP', K_READY)
  if not element then break end
  take(element)
end
fill()
expire_claims(ttl, lease)
return out
