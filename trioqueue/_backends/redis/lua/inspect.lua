-- What an operator wants to see, in one consistent read: list lengths, the claim
-- held longest, and how many finished records the retention keeps.
-- Returns {ready, stored, processing, claims, oldest claim time or '', dead, finished,
-- scheduled, deferred}.
local oldest = redis.call('ZRANGE', K_HELD, 0, 0, 'WITHSCORES')[2]
return {
  ready_len() + stream_waiting(), redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS),
  redis.call('LLEN', K_PROC),
  redis.call('ZCARD', K_CLAIMS), oldest and stamp(NOW - tonumber(oldest)) or '',
  redis.call('LLEN', K_DEAD), redis.call('ZCARD', K_FIN), redis.call('ZCARD', K_SCHED),
  redis.call('ZCARD', K_DEFER),
}
