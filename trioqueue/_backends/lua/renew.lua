-- Extend leases. ARGV[8]: lease seconds; ARGV[9]: the claims set's lifetime
-- ('' = none); ARGV[10..]: id, token pairs.
local lease, ttl = tonumber(ARGV[8]), tonumber(ARGV[9])
touch()
for i = 10, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('HGET', jobkey(id), 't') == ARGV[i + 1] then
    redis.call('ZADD', K_CLAIMS, 'XX', NOW + lease, MARK .. id)
  end
end
expire_claims(ttl, lease)
return true
