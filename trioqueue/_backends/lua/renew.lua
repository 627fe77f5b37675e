-- Extend leases. ARGV[6]: lease seconds; ARGV[7]: the claims set's lifetime
-- ('' = none); ARGV[8..]: id, token pairs.
local lease, ttl = tonumber(ARGV[6]), tonumber(ARGV[7])
for i = 8, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', jobkey(id), 't') == ARGV[i + 1] then
    redis.call('ZADD', K_CLAIMS, 'XX', NOW + lease, MARK .. id)
  end
end
if ttl and redis.call('EXISTS', K_CLAIMS) == 1 then
  -- never shorter than a lease: live claims must outlive their renewal period
  redis.call('EXPIRE', K_CLAIMS, math.ceil(math.max(ttl, 2 * lease)))
end
return true
