-- Keep a handler's progress on its job's record (RedisBackend.set_progress), if the
-- claim is still held: ARGV[8] the job id, ARGV[9] the claim's token, ARGV[10] the
-- progress as JSON. Not a state change: the record's times stay. Returns 1 if kept.
local key = jobkey(ARGV[8])
if redis.call('HGET', key, 't') ~= ARGV[9] then return 0 end
redis.call('HSET', key, 'g', ARGV[10])
return 1
