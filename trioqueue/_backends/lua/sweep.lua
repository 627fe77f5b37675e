-- Recover expired claims, stamp unregistered processing entries, schedule stored
-- jobs, evict old finished records. ARGV[8]: seconds before a stamped entry expires.
-- A simple queue runs a job at most once: an expired claim whose handler may have
-- started becomes a dead letter, not a retry.
-- Returns {scheduled, recovered, evicted}.
local grace = tonumber(ARGV[8])
local recovered = 0
local function abandon(id)
  unclaim(id)
  redis.call('HSET', jobkey(id), 's', 'failed', 'u', stamp(NOW), 'w',
    'its worker stopped while holding it; a simple queue never runs a job twice, '
    .. 'so requeue it by hand if it should run again')
  redis.call('LPUSH', K_DEAD, id)
  count('dead_lettered')
end

for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_CLAIMS, '-inf', NOW)) do
  local id = string.sub(member, 2)
  if expired_reference(member) then
    redis.call('LREM', K_PROC, 1, member)
    redis.call('ZREM', K_CLAIMS, member)
    count('expired')
  elseif string.sub(member, 1, 1) ~= MARK or redis.call('EXISTS', jobkey(id)) == 0 then
    -- moved by a BLMOVE whose claim was never registered (its worker died)
    redis.call('LREM', K_PROC, 1, member)
    redis.call('ZREM', K_CLAIMS, member)
    local adopted = adopt(member)
    if adopted then schedule(adopted) end
    recovered = recovered + 1
  elseif SIMPLE and redis.call('HGET', jobkey(id), 's') == 'processing' then
    abandon(id)  -- its handler may have run
  else
    -- a second delivery that died too: the job may be what kills its workers, so it
    -- runs alone from now on, and cannot take other jobs down with it
    putback(id, false, tonumber(redis.call('HGET', jobkey(id), 'd') or '0') >= 2)
    recovered = recovered + 1
  end
end
-- An element in the processing list with no claim time would never be recovered:
-- give it one, so it is recovered after the grace unless its claim is registered.
for _, element in ipairs(redis.call('LRANGE', K_PROC, 0, -1)) do
  if not redis.call('ZSCORE', K_CLAIMS, element) then
    redis.call('ZADD', K_CLAIMS, NOW + grace, element)
  end
end
local scheduled = fill()
local evicted = 0
if MAX_AGE then
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', K_FIN, '-inf', NOW - MAX_AGE)) do
    forget_finished(id)
    redis.call('ZREM', K_FIN, id)
    evicted = evicted + 1
  end
end
count('recovered', recovered)
return {scheduled, recovered, evicted}
