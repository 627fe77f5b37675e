-- Record that a schedule's tick is stored in the queue (open_scheduler), unless a
-- later one is recorded: the config hash's 'cron:<name>' holds the latest tick, in
-- seconds since the epoch. ARGV[8]: the schedule's name, ARGV[9]: the tick.
local field = 'cron:' .. ARGV[8]
local recorded = tonumber(redis.call('HGET', K_CONF, field) or '')
if not recorded or tonumber(ARGV[9]) > recorded then
  redis.call('HSET', K_CONF, field, ARGV[9])
end
return 1
