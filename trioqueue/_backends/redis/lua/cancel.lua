-- Cancel job ARGV[8]. One no claim holds leaves every list and set it waits in
-- (ready, stored, suspects, scheduled) and ends cancelled now; a claimed one (running,
-- prefetched, sleeping before a retry) is marked 'cx': renew.lua tells its pool, which
-- stops it, and a claim of it given back or recovered ends it (putback). So is an
-- entry of a stream source its group has not read yet: it ends when read.
-- Returns 'cancelled', 'requested', 'finished', or 'unknown'.
local id = ARGV[8]
local key = jobkey(id)
local state = redis.call('HGET', key, 's')
if not state then return 'unknown' end
if is_finished(state) then
  return 'finished'
end
local token = redis.call('HGET', key, 't')
if token and token ~= '' then
  redis.call('HSET', key, 'cx', '1')
  return 'requested'
end
local removed = redis.call('LREM', level_of(id), 1, MARK .. id) + redis.call('LREM', K_UNQ, 1, id)
  + redis.call('LREM', K_SUS, 1, id) + redis.call('ZREM', K_SCHED, id)
  + redis.call('ZREM', K_DEFER, id)
if K_STREAM and removed == 0 then
  -- an entry its group has not read yet: the stream keeps it (other groups read it too),
  -- so it ends when this group reads it (claim.lua), counted until then as waiting
  redis.call('HSET', key, 'cx', '1')
  return 'requested'
end
-- one a BLMOVE moved and no claim took yet is skipped when its claim comes (claim.lua)
cancel_now(id, 'cancelled while it waited for a worker')
fill()  -- its place goes to a job stored for want of room
return 'cancelled'
