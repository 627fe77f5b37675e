-- The ids of the jobs in one place, next in turn first, at most ARGV[9] of them.
-- ARGV[8], the place: 'ready' (the order claims take them: the highest level first,
-- from the right of each list), 'stored' (the suspects, which run first and alone,
-- then the jobs stored for want of room, in the order they go on), 'scheduled'
-- (soonest due first), 'deferred' (oldest first), 'claimed' (longest held first), 'dead' or 'finished' (oldest
-- first). Elements another client pushed have no id until a claim adopts them, and
-- the wake element none at all: both are left out.
local place, limit = ARGV[8], tonumber(ARGV[9])
local ids = {}
local function from_right(key, marked)
  local start = -1
  while #ids < limit do
    local items = redis.call('LRANGE', key, start - 99, start)
    for i = #items, 1, -1 do
      local item = items[i]
      if not marked then
        ids[#ids + 1] = item
      elseif string.sub(item, 1, 1) == MARK and #item > 1 then
        ids[#ids + 1] = string.sub(item, 2)
      end
      if #ids >= limit then return end
    end
    if #items < 100 then return end
    start = start - 100
  end
end
if limit <= 0 then return ids end
if place == 'ready' then
  for _, level in ipairs(LEVELS) do from_right(level, true) end
elseif place == 'stored' then
  from_right(K_SUS, false)
  from_right(K_UNQ, false)
elseif place == 'dead' then
  from_right(K_DEAD, false)
elseif place == 'claimed' then  -- held as MARK .. id, as on the lists
  for _, member in ipairs(redis.call('ZRANGE', K_HELD, 0, limit - 1)) do
    ids[#ids + 1] = string.sub(member, 2)
  end
else
  local sets = {scheduled = K_SCHED, deferred = K_DEFER}
  ids = redis.call('ZRANGE', sets[place] or K_FIN, 0, limit - 1)
end
return ids
