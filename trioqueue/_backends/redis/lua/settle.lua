-- Record the outcomes of attempts, in order. ARGV[8..]: groups of seven: id, token,
-- kind, error type, error message, reason, error traceback. kind: ack (reason: the
-- handler's return value as JSON, '' for none; error message: why it was not kept),
-- drop, dead, retry (the claim keeps the job; reason: seconds until the next attempt is
-- due, kept as the job's 'due' so that a put-back or recovery waits out the rest),
-- requeue (a job that waited to retry goes back on the queue, unless it was cancelled
-- meanwhile), cancel (a job cancelled while claimed ends: cancel.lua).
-- Returns, per group, the job's seconds since acceptance, or '' if the claim is stale.
-- Whether keeping *bytes* more would take Redis past its maxmemory. This script runs
-- on a full Redis (allow-oom: acks free claims), so it must not grow the data there:
-- a result is dropped instead, with the reason. INFO is read once per call, and only
-- for a result to keep; what this call keeps counts on top of it.
local memory = nil
local function over_memory(bytes)
  if not memory then
    local info = redis.call('INFO', 'memory')
    memory = {used = tonumber(string.match(info, 'used_memory:(%d+)')) or 0,
      limit = tonumber(string.match(info, 'maxmemory:(%d+)')) or 0}
  end
  if memory.limit > 0 and memory.used + bytes > memory.limit then return true end
  memory.used = memory.used + bytes
  return false
end

local function settle(id, token, kind, etype, emsg, reason, etrace)
  local key = jobkey(id)
  local holder = redis.call('HGET', key, 't')
  if holder ~= token then
    local state = redis.call('HGET', key, 's')
    local life_from = tonumber(redis.call('HGET', key, 'lf') or '0')
    if kind == 'ack' and holder and holder ~= '' and
      (state == 'processing' or state == 'failed_retry') and
      (tonumber(token) or 0) > life_from then
      -- A late success: this run's lease ran out and the job was claimed again, but no
      -- run of it has finished. The job is done: keep it. The other run's claim ends
      -- here, and its outcome will be refused. Not a claim from an earlier life of the
      -- job (before it was requeued from the dead letters or enqueued anew): stale.
      unclaim(id)
      redis.call('HSET', key, 's', 'processing')  -- as the ack below expects
    elseif holder == '' and redis.call('HGET', key, 'lt') == token then
      -- this claim's own final outcome, sent again after its reply was lost (Redis
      -- restarted, the link broke): recorded already, and no lease ran out
      count('resent')
      return stamp(NOW - tonumber(redis.call('HGET', key, 'c')))
    else
      count('stale')
      -- a run that outlived its lease (a blocked event loop?): max_deliveries says so
      if redis.call('EXISTS', key) == 1 then redis.call('HINCRBY', key, 'l', 1) end
      return ''
    end
  end
  local age = stamp(NOW - tonumber(redis.call('HGET', key, 'c')))
  if kind ~= 'requeue' and kind ~= 'cancel' and redis.call('HGET', key, 's') ~= 'processing' then
    -- the same outcome sent again after its reply was lost: it already counted
    return age
  end
  if kind == 'requeue' then
    unclaim(id, token)
    redis.call('HDEL', key, 'due')
    if redis.call('HGET', key, 'cx') then
      cancel_now(id, CANCELLED_HELD)  -- cancelled while it waited out its backoff
    else
      schedule(id)
    end
    return age
  end
  if kind == 'cancel' or (kind == 'dead' and redis.call('HGET', key, 'cx')) then
    -- its pool stopped it (or never started it): no attempt ended; or it was cancelled
    -- while its last attempt failed, or while a simple queue's pool stopped: cancelled
    unclaim(id, token)
    cancel_now(id, CANCELLED_HELD)
    return age
  end
  if not string.match(redis.call('HGET', key, 'a') or '', '^%d%d?%d?%d?%d?%d?%d?%d?%d?$') then
    -- attempts changed by hand ('inf', 'nan', ...), which HINCRBY refuses: the claim
    -- dead-letters such a job, naming the field, and its count starts again
    redis.call('HSET', key, 'a', 0)
  end
  local attempt = redis.call('HINCRBY', key, 'a', 1)
  redis.call('HSET', key, 'u', stamp(NOW))
  count('processed')
  if etype ~= '' then
    redis.call('HSET', key, 'et', etype, 'em', emsg, 'tb', etrace, 'ea', attempt)
    count('failed')
  end
  if kind == 'retry' then
    redis.call('HSET', key, 's', 'failed_retry', 'due', stamp(NOW + (tonumber(reason) or 0)))
    redis.call('SADD', K_RETRY, id)  -- until its claim ends (unclaim)
    count('retries')
    return age
  end
  unclaim(id, token)
  redis.call('HDEL', key, 'due')  -- a late success may end another run's backoff
  -- first: the retention below may forget the record, and its entry with it
  entry_done(id)
  ended(id)
  if kind == 'ack' then
    redis.call('HSET', key, 's', 'completed')
    -- the handler's return value (JSON) in the reason slot, why it was not kept in the
    -- error message's
    if reason ~= '' and over_memory(#reason) then
      emsg = string.format('the result (%d bytes) was not kept: Redis is out of memory ' ..
        '(used_memory %d of maxmemory %d bytes); free memory or raise maxmemory, or ' ..
        'return a reference to the result stored elsewhere', #reason, memory.used, memory.limit)
      reason = ''
    end
    if reason ~= '' then redis.call('HSET', key, 'res', reason) end
    if emsg ~= '' then redis.call('HSET', key, 'rerr', emsg) end
    count('succeeded')
    release_followers(id)
    finished(id)
  elseif kind == 'drop' then
    redis.call('HSET', key, 's', 'dropped', 'w', reason)
    count('dropped')
    fail_followers(id, ENDED_HOW.dropped)
    finished(id)
  else
    redis.call('HSET', key, 's', 'failed', 'w', reason)
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    fail_followers(id, ENDED_HOW.failed)
  end
  return age
end

touch()
local out = {}
for i = 8, #ARGV, 7 do
  out[#out + 1] = settle(ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5],
    ARGV[i + 6])
end
return out
