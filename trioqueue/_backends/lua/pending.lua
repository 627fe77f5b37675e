-- Jobs accepted and not finished (ready, stored, suspect or claimed), in one
-- consistent read: a job moving between two lists is counted once, never missed.
return redis.call('LLEN', K_READY) + redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS)
  + claimed_count()
