-- Accept a job, or find the existing one. ARGV[8..11]: id, payload, payload hash, mode.
local id, payload, hash, mode = ARGV[8], ARGV[9], ARGV[10], ARGV[11]
local key = jobkey(id)
local existing = redis.call('HGET', key, 'h')
if existing then
  if existing == hash then
    count('deduplicated')
    return {'dup', redis.call('HGET', key, 'q')}
  end
  count('conflicts')
  return {'conflict', existing}
end
if mode ~= 'submit' and redis.call('LLEN', K_READY) >= CAPACITY then
  return {'full', tostring(CAPACITY)}
end
redis.call('ZREM', K_FIN, id)  -- an earlier job of this id may have expired
redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0,
  'c', stamp(NOW), 't', '')
count('enqueued')
return {'new', tostring(schedule(id))}
