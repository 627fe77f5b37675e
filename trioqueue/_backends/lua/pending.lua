-- Jobs accepted and not finished (ready, stored, suspect or claimed), in one
-- consistent read: a job moving between two lists is counted once, never missed.
local claimed
if SIMPLE then  -- a simple queue's claims are in the claims set only
  claimed = redis.call('ZCARD', K_CLAIMS)
else
  claimed = redis.call('LLEN', K_PROC)
end
return redis.call('LLEN', K_READY) + redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS)
  + claimed
