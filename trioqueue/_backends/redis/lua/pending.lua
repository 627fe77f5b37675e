-- Jobs accepted and not finished (ready, stored, suspect, waiting for their due time
-- or claimed), in one
-- consistent read: a job moving between two lists is counted once, never missed.
local held = ready_len() + redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS)
  + claimed_count() + redis.call('ZCARD', K_SCHED) + redis.call('ZCARD', K_DEFER)
-- A stream source's jobs held here are entries pending in the group as well (but for
-- dead letters requeued after their entry was acknowledged); entries other consumers
-- left pending count until the sweep takes them over, so the larger count is the one.
return math.max(held, stream_pending()) + stream_waiting()
