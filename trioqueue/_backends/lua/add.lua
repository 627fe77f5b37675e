-- Accept jobs in order, or find the existing ones. ARGV[8]: the mode; then each job as
-- three arguments: id, payload, payload hash. Returns two values per job handled:
-- {'new' | 'dup', queued 0/1}, {'conflict', the stored hash} or {'full', capacity}. In
-- 'wait' mode the first 'full' ends the call: the caller waits for room and sends the
-- rest again; in 'nowait' mode the rest are still looked at (a duplicate is found even
-- when the queue is full); 'submit' never meets a full queue.
local mode = ARGV[8]
local replies = {}
local counts = {enqueued = 0, deduplicated = 0, conflicts = 0}
local function finish()
  for field, n in pairs(counts) do count(field, n) end
  return replies
end
for i = 9, #ARGV, 3 do
  local id, payload, hash = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local key = jobkey(id)
  local existing = redis.call('HGET', key, 'h')
  if existing then
    if existing == hash then
      counts.deduplicated = counts.deduplicated + 1
      replies[#replies + 1] = 'dup'
      replies[#replies + 1] = redis.call('HGET', key, 'q')
    else
      counts.conflicts = counts.conflicts + 1
      replies[#replies + 1] = 'conflict'
      replies[#replies + 1] = existing
    end
  elseif mode ~= 'submit' and redis.call('LLEN', K_READY) >= CAPACITY then
    replies[#replies + 1] = 'full'
    replies[#replies + 1] = tostring(CAPACITY)
    if mode == 'wait' then return finish() end
  else
    redis.call('ZREM', K_FIN, id)  -- an earlier job of this id may have expired
    redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0,
      'c', stamp(NOW), 't', '', 'lf', life_from())
    counts.enqueued = counts.enqueued + 1
    replies[#replies + 1] = 'new'
    if K_STREAM then
      -- no MAXLEN: trimming would drop entries some group has not read yet
      ensure_group()
      local entry = redis.call('XADD', K_STREAM, '*', 'id', id, 'payload', payload, 'hash', hash)
      redis.call('HSET', key, 'e', entry, 'q', 1, 'r', stamp(NOW), 'u', stamp(NOW))
      replies[#replies + 1] = '1'
    else
      replies[#replies + 1] = tostring(schedule(id))
    end
  end
end
return finish()
