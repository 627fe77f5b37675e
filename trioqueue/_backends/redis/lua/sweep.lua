-- Recover expired claims, stamp unregistered processing entries, make dead letters of
-- the followers of failed jobs (see fail_followers), schedule stored jobs, evict old
-- finished records; each a bounded slice per call. ARGV[8]: seconds before a stamped
-- entry expires.
-- A simple queue runs a job at most once: an expired claim whose handler may have
-- started becomes a dead letter, not a retry.
-- Returns {scheduled, recovered, evicted, 1 if work is left for another call else 0,
-- delayed jobs that came due and went on the ready list}.
local grace = tonumber(ARGV[8])
-- a recovery runs about a dozen commands: 200 of them take Redis a few milliseconds
local RECOVERY_SLICE = 200
local recovered = 0
local function abandon(id)
  unclaim(id)
  if redis.call('HGET', jobkey(id), 'cx') then
    cancel_now(id, CANCELLED_HELD)  -- it was cancelled: that is how it ends
    return
  end
  redis.call('HSET', jobkey(id), 's', 'failed', 'u', stamp(NOW), 'w',
    'its worker stopped while holding it; a simple queue never runs a job twice, '
    .. 'so requeue it by hand if it should run again')
  redis.call('LPUSH', K_DEAD, id)
  count('dead_lettered')
  ended(id)
  doom_followers(id, ENDED_HOW.failed)  -- failed below, with the others still to fail
end

touch()
-- Within one lease after a silence (see touch), an expired claim gets one more lease
-- instead of being recovered: its owner may be alive and unable to renew until now.
-- 'x' on the job records the lease so given; a claim still at it is not given another.
local after_silence = NOW < (tonumber(redis.call('HGET', K_CONF, 'quiet_end')) or -math.huge)
  + grace
local expired = redis.call('ZRANGEBYSCORE', K_CLAIMS, '-inf', NOW, 'WITHSCORES', 'LIMIT', 0,
  RECOVERY_SLICE)
-- latest expiry first: each recovered job goes to the front, so the earliest ends first
for i = #expired - 1, 1, -2 do
  local member, score = expired[i], tonumber(expired[i + 1])
  local id = string.sub(member, 2)
  local key = jobkey(id)
  if member == WAKE then
    -- a wake element a BLMOVE moved, whose consumer died before its claim: no job
    unland(member)
    redis.call('ZREM', K_CLAIMS, member)
    wake_taken()
  elseif after_silence and string.sub(member, 1, 1) == MARK and redis.call('EXISTS', key) == 1
    and tonumber(redis.call('HGET', key, 'x') or '') ~= score then
    local until_ = tonumber(stamp(NOW + grace))  -- as 'x' holds it: compared exactly
    redis.call('ZADD', K_CLAIMS, until_, member)
    redis.call('HSET', key, 'x', stamp(until_))
  elseif expired_reference(member) then
    unland(member)
    redis.call('ZREM', K_CLAIMS, member)
    redis.call('ZREM', K_HELD, member)
    count('expired')
  elseif string.sub(member, 1, 1) ~= MARK or redis.call('EXISTS', jobkey(id)) == 0 then
    -- moved by a BLMOVE whose claim was never registered (its worker died)
    unland(member)
    redis.call('ZREM', K_CLAIMS, member)
    local adopted = adopt(member)
    if adopted then schedule(adopted) end
    recovered = recovered + 1
  elseif SIMPLE and redis.call('HGET', jobkey(id), 's') == 'processing' then
    abandon(id)  -- its handler may have run
  else
    -- taken in its turn already: next in line again; but a second delivery that died
    -- too may be what kills its workers, so it runs alone from now on, and cannot
    -- take other jobs down with it
    putback(id, true, unanswered(id) >= 2)
    recovered = recovered + 1
  end
end
-- An element in the processing list with no claim time would never be recovered:
-- give it one, so it is recovered after the grace unless its claim is registered.
for _, element in ipairs(redis.call('LRANGE', K_PROC, 0, SLICE - 1)) do
  if not redis.call('ZSCORE', K_CLAIMS, element) then
    redis.call('ZADD', K_CLAIMS, NOW + grace, element)
  end
end
-- A stream source: entries of the group pending for longer than a lease that no
-- claim here holds (another program's consumer read them and stopped, or their job
-- was never registered) are taken over (XAUTOCLAIM, one slice per sweep, the scan
-- going on from where the last sweep left it) and delivered again; a finished job's
-- lingering entry is acknowledged. Entries of live jobs only change consumer: their
-- owner's next renewal takes them back.
if K_STREAM and redis.call('HGET', K_CONF, 'group') == '1'
  and redis.call('EXISTS', K_STREAM) == 1 then
  local cursor = redis.call('HGET', K_CONF, 'xautoclaim') or '0-0'
  local found = redis.pcall('XAUTOCLAIM', K_STREAM, GROUP, CONSUMER, math.ceil(MIN_IDLE * 1000),
    cursor, 'COUNT', 100, 'JUSTID')
  if type(found) == 'table' and not found.err then
    for _, entry in ipairs(found[2]) do
      local fields = redis.call('XRANGE', K_STREAM, entry, entry)[1]
      if fields then
        local pel = redis.call('XPENDING', K_STREAM, GROUP, entry, entry, 1)[1]
        local id, new = entry_job(entry, fields[2], pel and pel[4] or 1)
        local state = id and redis.call('HGET', jobkey(id), 's')
        if new and id then
          schedule(id, true)  -- taken in its turn already: next in line
          recovered = recovered + 1
        elseif is_finished(state) then
          entry_done(id)
        end
      end
    end
    redis.call('HSET', K_CONF, 'xautoclaim', found[1])
  end
end
local failing = fail_pending(FAIL_SLICE)
local scheduled, more, due = fill()
local evicted = 0
if MAX_AGE then
  local old = redis.call('ZRANGEBYSCORE', K_FIN, '-inf', NOW - MAX_AGE, 'LIMIT', 0, SLICE)
  for _, id in ipairs(old) do
    forget_finished(id)
    redis.call('ZREM', K_FIN, id)
    evicted = evicted + 1
  end
  more = more or #old == SLICE
end
count('recovered', recovered)
more = more or failing or #expired == 2 * RECOVERY_SLICE or redis.call('LLEN', K_PROC) > SLICE
return {scheduled, recovered, evicted, more and 1 or 0, due}
