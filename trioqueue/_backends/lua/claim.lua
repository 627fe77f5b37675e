-- Claim up to ARGV[8] ready jobs for ARGV[9] seconds; ARGV[10]: the claims set's
-- lifetime ('' = none); ARGV[11]: most deliveries of one job ('' = no limit).
-- ARGV[12], if given, is an element a blocking BLMOVE already moved to the
-- processing list: it is claimed first. A suspect is claimed before anything else,
-- and alone: the pool runs it once its other handlers are done.
-- Returns rows {id, payload, attempts, token, ready at, '1' for a suspect}.
-- A reliable claim keeps the job in the processing list until its outcome; a simple
-- claim takes it off every list (the claims set still holds its lease).
local max, lease, ttl = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
local max_deliveries, given = tonumber(ARGV[11]), ARGV[12]
local out = {}

local function take(element)
  -- element sits in the processing list
  local id
  local ours = string.sub(element, 1, 1) == MARK
  if expired_reference(element) then
    redis.call('LREM', K_PROC, 1, element)
    redis.call('ZREM', K_CLAIMS, element)  -- the sweeper may have stamped it
    count('expired')
    return
  end
  if ours and redis.call('EXISTS', jobkey(string.sub(element, 2))) == 1 then
    id = string.sub(element, 2)
  else
    -- pushed by another client (binary payloads may start with the mark byte too)
    redis.call('LREM', K_PROC, 1, element)
    redis.call('ZREM', K_CLAIMS, element)
    id = adopt(element)
    if not id then return end
    if not SIMPLE then redis.call('LPUSH', K_PROC, MARK .. id) end
  end
  local key = jobkey(id)
  local token_now = redis.call('HGET', key, 't')
  if token_now and token_now ~= '' then
    -- someone holds a live claim on this job (the sweeper put back what a BLMOVE
    -- moved, and another worker claimed it): that entry is theirs, leave it
    count('stale')
    return
  end
  local state = redis.call('HGET', key, 's')
  if state ~= 'received' and state ~= 'failed_retry' then
    -- a reference whose job is gone or already claimed: nothing to run
    redis.call('LREM', K_PROC, 1, MARK .. id)
    count('stale')
    return
  end
  -- every claim is a delivery, except one a clean shutdown gave back (see release)
  local deliveries = redis.call('HINCRBY', key, 'd', 1)
  if max_deliveries and deliveries > max_deliveries then
    -- a poison job: its handler keeps killing its worker (or it never finishes)
    redis.call('LREM', K_PROC, 1, MARK .. id)
    redis.call('HSET', key, 's', 'failed', 'q', 0, 'u', stamp(NOW), 'w',
      'delivered ' .. max_deliveries .. ' times (max_deliveries) without an outcome '
      .. 'each time: its handler may be killing the worker; fix that, then requeue it')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    return
  end
  local token = tostring(redis.call('INCR', K_SEQ))
  redis.call('HSET', key, 's', 'processing', 'q', 0, 't', token, 'u', stamp(NOW),
    'k', stamp(NOW))
  redis.call('ZADD', K_CLAIMS, NOW + lease, MARK .. id)
  if KEY_TTL_MS then redis.call('PERSIST', key) end  -- a claimed job never expires
  if SIMPLE then redis.call('LREM', K_PROC, 1, MARK .. id) end
  local rec = redis.call('HMGET', key, 'p', 'a', 'r')
  out[#out + 1] = {id, rec[1], rec[2], token, rec[3], '0'}
end

local function expire_claims_set()
  if ttl and redis.call('EXISTS', K_CLAIMS) == 1 then
    -- never shorter than a lease: live claims must outlive their renewal period
    redis.call('EXPIRE', K_CLAIMS, math.ceil(math.max(ttl, 2 * lease)))
  end
end

if not given then
  while #out == 0 do  -- a suspect dead-lettered for max_deliveries makes room for the next
    local id = redis.call('RPOP', K_SUS)
    if not id then break end
    if not SIMPLE then redis.call('LPUSH', K_PROC, MARK .. id) end
    take(MARK .. id)
  end
  if #out > 0 then
    out[1][6] = '1'
    expire_claims_set()
    return out
  end
end

if given then
  -- only if it is still there: the sweeper may have put it back meanwhile
  if redis.call('LPOS', K_PROC, given) then take(given) end
end
while #out < max do
  local element
  if SIMPLE then
    element = redis.call('RPOP', K_READY)
  else
    element = redis.call('LMOVE', K_READY, K_PROC, 'RIGHT', 'LEFT')
  end
  if not element then break end
  take(element)
end
fill()
expire_claims_set()
return out
