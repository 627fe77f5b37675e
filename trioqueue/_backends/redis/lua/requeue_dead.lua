-- Put the dead letter ARGV[8] back with fresh attempts. Returns {1, its record as
-- requeued (HGETALL)}, or {0} if it is not a dead letter, or {-1} if its record is
-- gone (changed by hand): then nothing changes.
local id = ARGV[8]
if not redis.call('LPOS', K_DEAD, id) then return {0} end
local key = jobkey(id)
if redis.call('HEXISTS', key, 'p') == 0 then return {-1} end
redis.call('LREM', K_DEAD, 1, id)
redis.call('HSET', key, 's', 'received', 'a', 0, 'd', 0, 'w', '', 'lf', life_from())
redis.call('HDEL', key, 'dw')
local unique = redis.call('HGET', key, 'uk')
if unique then redis.call('HSETNX', K_UNIQUE, unique, id) end  -- unless a newer job holds it
schedule(id)
count('dead_requeued')
return {1, redis.call('HGETALL', key)}
