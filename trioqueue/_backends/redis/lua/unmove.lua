-- Undo a BLMOVE whose caller was cancelled before it could claim what it moved:
-- ARGV[8] is the element. It goes back in its turn, at the front of the ready list,
-- or first in line among the stored jobs when producers filled the room it left;
-- unless the sweeper took it already. Returns 1 if it was put back.
local element = ARGV[8]
touch()
if not unland(element) then return 0 end
local id = string.sub(element, 2)
if string.sub(element, 1, 1) == MARK and redis.call('EXISTS', jobkey(id)) == 1 then
  schedule(id, true)
else
  -- another client's push, or a job whose record expired: never counted in the capacity
  redis.call('RPUSH', K_READY, element)
end
return 1
