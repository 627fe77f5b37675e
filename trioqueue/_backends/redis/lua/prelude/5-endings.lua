-- Prelude, part 5: cancelling a job, and putting a claimed job back.

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
