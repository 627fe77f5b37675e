-- Counters and true gauges in one consistent read, each gauge one step.
-- Returns {counter field/value pairs, {depth, unqueued, inflight, retry_waiting, dead,
-- scheduled}}.
local retrying = redis.call('SCARD', K_RETRY)
return {
  redis.call('HGETALL', K_STATS),
  {ready_len() + stream_waiting(), redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS),
   claimed_count() - retrying, retrying,
   redis.call('LLEN', K_DEAD), redis.call('ZCARD', K_SCHED)},
}
