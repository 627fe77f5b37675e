-- Undo a BLMOVE whose caller was cancelled before it could claim what it moved:
-- ARGV[8] is the element; it goes back to the front of the ready list (its turn had
-- come), unless the sweeper already took it. Returns 1 if it was put back.
local element = ARGV[8]
if redis.call('LREM', K_PROC, 1, element) == 0 then return 0 end
redis.call('ZREM', K_CLAIMS, element)  -- the sweeper may have stamped it
redis.call('RPUSH', K_READY, element)
return 1
