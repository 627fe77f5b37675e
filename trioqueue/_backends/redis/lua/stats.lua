-- Counters and true gauges in one consistent read, each gauge one step.
-- Returns {counter field/value pairs, {depth, unqueued, inflight, retry_waiting, dead,
-- scheduled, deferred}, {ready jobs of each priority, highest first}}.
local retrying = redis.call('SCARD', K_RETRY)
local levels = level_lengths()
levels[3] = levels[3] + stream_waiting()  -- a stream's entries are all of priority 0
return {
  redis.call('HGETALL', K_STATS),
  {ready_len() + stream_waiting(), redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS),
   claimed_count() - retrying, retrying,
   redis.call('LLEN', K_DEAD), redis.call('ZCARD', K_SCHED), redis.call('ZCARD', K_DEFER)},
  levels,
}
