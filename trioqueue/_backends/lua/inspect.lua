-- What an operator wants to see, in one consistent read: list lengths, the claim
-- held longest, and how many finished records the retention keeps.
-- Returns {ready, stored, processing, claims, oldest claim time or '', dead, finished}.
local oldest
for _, member in ipairs(redis.call('ZRANGE', K_CLAIMS, 0, -1)) do
  if string.sub(member, 1, 1) == MARK then
    local at = tonumber(redis.call('HGET', jobkey(string.sub(member, 2)), 'k'))
    if at and (not oldest or at < oldest) then oldest = at end
  end
end
return {
  redis.call('LLEN', K_READY), redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS),
  redis.call('LLEN', K_PROC),
  redis.call('ZCARD', K_CLAIMS), oldest and stamp(NOW - oldest) or '',
  redis.call('LLEN', K_DEAD), redis.call('ZCARD', K_FIN),
}
