-- Recover expired claims, stamp unregistered processing entries, schedule stored
-- jobs, evict old finished records. ARGV[6]: seconds before a stamped entry expires.
-- Returns {scheduled, recovered, evicted}.
local grace = tonumber(ARGV[6])
local recovered = 0
for _, member in ipairs(redis.call('ZRANGEBYSCORE', K_CLAIMS, '-inf', NOW)) do
  if string.sub(member, 1, 1) == MARK and redis.call('EXISTS', jobkey(string.sub(member, 2))) == 1 then
    putback(string.sub(member, 2))
  else
    -- moved by a BLMOVE whose claim was never registered (its worker died)
    redis.call('LREM', K_PROC, 1, member)
    redis.call('ZREM', K_CLAIMS, member)
    local id = adopt(member)
    if id then schedule(id) end
  end
  recovered = recovered + 1
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
