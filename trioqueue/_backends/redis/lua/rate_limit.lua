-- Set or read the queue's rate limits (RedisBackend.set_rate_limits, rate_limits):
-- ARGV[8] is '1' to set, '' to only read; ARGV[9] and ARGV[10] the queue's limit and
-- the per-key limit as trioqueue/_rate.py's RateLimit.stored writes them ('' = none).
-- Every claim script reads them (claim.lua), so every process follows at once. A
-- changed queue limit starts afresh (its theoretical arrival time goes); each rate
-- key's times were kept under the limit they name, and count for nothing under
-- another (see claim.lua's key_allows).
-- Returns {the queue's limit, the per-key limit}, as stored now ('' = none).
if ARGV[8] == '1' then
  if ARGV[9] ~= (agreed[8] or '') then redis.call('HDEL', K_CONF, 'rate_tat') end
  for i, field in ipairs({'rate', 'key_rate'}) do
    local value = ARGV[8 + i]
    if value == '' then
      redis.call('HDEL', K_CONF, field)
    else
      redis.call('HSET', K_CONF, field, value)
    end
  end
  return {ARGV[9], ARGV[10]}
end
return {agreed[8] or '', agreed[10] or ''}
