-- Forget the dead letter ARGV[8], or all of them when it is ''. Returns how many.
local ids
if ARGV[8] ~= '' then
  if redis.call('LREM', K_DEAD, 1, ARGV[8]) == 0 then return 0 end
  ids = {ARGV[8]}
else
  ids = redis.call('LRANGE', K_DEAD, 0, -1)
  redis.call('DEL', K_DEAD)
end
for _, id in ipairs(ids) do redis.call('DEL', jobkey(id)) end
return #ids
