-- Jobs accepted and not finished (ready, stored, suspect or claimed), in one
-- consistent read: a job moving between two lists is counted once, never missed.
local held = redis.call('LLEN', K_READY) + redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS)
  + claimed_count()
-- A stream source's jobs held here are entries pending in the group as well (but for
-- dead letters requeued after their entry was acknowledged); entries other consumers
-- left pending count until the sweep takes them over, so the larger count is the one.
return math.max(held, stream_pending()) + stream_waiting()
