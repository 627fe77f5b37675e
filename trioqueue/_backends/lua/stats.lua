-- Counters and true gauges in one consistent read (a simple queue's claimed jobs
-- are in the claims set only).
-- Returns {counter field/value pairs, {depth, unqueued, inflight, retry_waiting, dead}}.
local retrying = 0
local processing
if SIMPLE then
  processing = redis.call('ZRANGE', K_CLAIMS, 0, -1)
else
  processing = redis.call('LRANGE', K_PROC, 0, -1)
end
for _, element in ipairs(processing) do
  if string.sub(element, 1, 1) == MARK then
    if redis.call('HGET', jobkey(string.sub(element, 2)), 's') == 'failed_retry' then
      retrying = retrying + 1
    end
  end
end
return {
  redis.call('HGETALL', K_STATS),
  {redis.call('LLEN', K_READY), redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS),
   #processing - retrying, retrying,
   redis.call('LLEN', K_DEAD)},
}
