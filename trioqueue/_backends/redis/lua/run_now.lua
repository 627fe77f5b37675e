-- Make job ARGV[8], which waits for its due time, due now: it goes on the ready list
-- (promote), or stays stored, first of the due jobs, when the list is full.
-- Returns {1, its record (HGETALL)}, or {0} if it is not waiting for a due time.
local id = ARGV[8]
if not redis.call('ZSCORE', K_SCHED, id) then return {0} end
-- before every other due job, so a full list takes it first as room frees
local first = redis.call('ZRANGE', K_SCHED, 0, 0, 'WITHSCORES')[2]
redis.call('ZADD', K_SCHED, math.min(NOW, tonumber(first) - 0.000001), id)
redis.call('HSET', jobkey(id), 'due', stamp(NOW))
promote(1)
return {1, redis.call('HGETALL', jobkey(id))}
