-- Pause or resume the queue (RedisBackend.pause, resume, is_paused): ARGV[8] is '1' to
-- pause, '0' to resume, '' to only read. A paused queue takes jobs in (they wait) and
-- gives none out: every claim script reads the flag (claim.lua), so every process
-- using the queue stops claiming at once, and jobs already claimed finish as usual.
-- The flag lives in the config hash, with the queue's other shared settings.
-- Returns 1 if the queue is paused now, else 0.
if ARGV[8] == '1' then
  redis.call('HSET', K_CONF, 'paused', '1')
  return 1
elseif ARGV[8] == '0' then
  redis.call('HDEL', K_CONF, 'paused')
  return 0
end
return PAUSED and 1 or 0
