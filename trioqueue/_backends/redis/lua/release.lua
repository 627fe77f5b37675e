-- Put unfinished claims back at once. ARGV[8..]: id, token pairs. Returns how many.
touch()
local n = 0
for i = 8, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', jobkey(id), 't') == ARGV[i + 1] then
    redis.call('HINCRBY', jobkey(id), 'd', -1)  -- given back unfinished: not a delivery
    putback(id, true)
    n = n + 1
  end
end
count('released', n)
return n
