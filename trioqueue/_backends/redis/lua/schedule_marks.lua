-- Each schedule's latest tick stored (mark_schedule.lua): {name, tick, name, tick, ...}.
local out = {}
local all = redis.call('HGETALL', K_CONF)
for i = 1, #all, 2 do
  if string.sub(all[i], 1, 5) == 'cron:' then
    out[#out + 1] = string.sub(all[i], 6)
    out[#out + 1] = all[i + 1]
  end
end
return out
