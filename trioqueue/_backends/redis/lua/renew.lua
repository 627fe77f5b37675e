-- Extend leases. ARGV[8]: lease seconds; ARGV[9]: the claims set's lifetime
-- ('' = none); ARGV[10..]: id, token pairs. Returns {the tokens no longer held, the
-- tokens of claims whose jobs were cancelled (cancel.lua)}.
local lease, ttl = tonumber(ARGV[8]), tonumber(ARGV[9])
touch()
local lost, cancel = {}, {}
for i = 10, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', jobkey(id), 't') == ARGV[i + 1] then
    redis.call('ZADD', K_CLAIMS, 'XX', NOW + lease, MARK .. id)
    if redis.call('HGET', jobkey(id), 'cx') then cancel[#cancel + 1] = ARGV[i + 1] end
    local entry = K_STREAM and redis.call('HGET', jobkey(id), 'e')
    if entry then
      -- keep the stream's own record fresh too: the entry stays this consumer's, and
      -- other consumers of the group do not see it idle (XAUTOCLAIM)
      redis.call('XCLAIM', K_STREAM, GROUP, CONSUMER, 0, entry, 'JUSTID')
    end
  else
    lost[#lost + 1] = ARGV[i + 1]
  end
end
expire_claims(ttl, lease)
return {lost, cancel}
