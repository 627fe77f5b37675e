-- Put the dead letter ARGV[8] back with fresh attempts; false if it is not one.
local id = ARGV[8]
if redis.call('LREM', K_DEAD, 1, id) == 0 then return false end
local key = jobkey(id)
redis.call('HSET', key, 's', 'received', 'a', 0, 'd', 0, 'w', '')
schedule(id)
count('dead_requeued')
return true
