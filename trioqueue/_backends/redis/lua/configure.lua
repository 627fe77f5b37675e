-- Change a queue's stored settings (RedisBackend.configure). Every script reads
-- them afresh, so running processes follow at once. The capacity may change at
-- any time (raised: stored jobs move up into the new room now). The mode and the
-- key TTL decide how claimed and waiting jobs are kept, so they change only while
-- the queue holds none; dead letters and finished records may stay.
-- ARGV[8..10]: capacity, mode, key TTL in seconds; '' = keep, 'none' = no key TTL.
-- Returns {0} when the queue has no settings yet (it does not exist);
-- {-1, waiting, claimed} when a mode or key TTL change finds jobs in it;
-- else {1, capacity, mode, key_ttl, moved} as stored now.
if not agreed[1] then return {0} end
local new = {ARGV[8] ~= '' and ARGV[8] or agreed[1], ARGV[9] ~= '' and ARGV[9] or agreed[2],
  agreed[3] or ''}
if ARGV[10] == 'none' then new[3] = '' elseif ARGV[10] ~= '' then new[3] = ARGV[10] end
if new[2] ~= agreed[2] or tonumber(new[3]) ~= tonumber(agreed[3]) then
  local waiting = ready_len() + redis.call('LLEN', K_UNQ) + redis.call('LLEN', K_SUS)
    + redis.call('ZCARD', K_SCHED)
  local claimed = claimed_count()
  if waiting + claimed > 0 then return {-1, waiting, claimed} end
end
redis.call('HSET', K_CONF, 'capacity', new[1], 'mode', new[2], 'key_ttl', new[3])
CAPACITY = tonumber(new[1])
KEY_TTL_MS = nil
if new[3] ~= '' then
  KEY_TTL_MS = math.ceil(tonumber(new[3]) * 1000)
  feed()
else
  for _, k in ipairs({K_UNQ, K_FIN, K_CONF, unpack(LEVELS)}) do redis.call('PERSIST', k) end
end
return {1, new[1], new[2], new[3], (fill())}
