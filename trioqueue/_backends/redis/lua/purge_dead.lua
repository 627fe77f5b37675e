-- Forget the dead letter ARGV[8], or when it is '' the oldest SLICE of them (call
-- again for the rest). Returns how many.
local ids
if ARGV[8] ~= '' then
  if redis.call('LREM', K_DEAD, 1, ARGV[8]) == 0 then return 0 end
  ids = {ARGV[8]}
else
  ids = redis.call('RPOP', K_DEAD, SLICE) or {}
end
for _, id in ipairs(ids) do redis.call('DEL', jobkey(id)) end
return #ids
