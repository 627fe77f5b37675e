-- Accept jobs in order, or find the existing ones. ARGV[8]: the mode; then each job as
-- six arguments: id, payload, payload hash, due time ('' for ready at once, 'd' and
-- seconds from now, or 'a' and seconds since the epoch on the server's clock), its
-- options ('' for none, else a JSON object: max_attempts, handler timeout, task
-- name; kept as the job's 'o', unread here, and handed out with each claim), and its
-- priority ('' for 0; kept as 'pr': which ready list it waits on).
-- Returns two values per job handled: {'new' | 'dup', queued 0/1, or 's' while it
-- waits for its due time}, {'conflict', the stored hash} or {'full', capacity}. A
-- delayed job takes no room until due, so it never finds the queue full. In
-- 'wait' mode the first 'full' ends the call: the caller waits for room and sends the
-- rest again; in 'nowait' mode the rest are still looked at (a duplicate is found even
-- when the queue is full); 'submit' never meets a full queue.
local mode = ARGV[8]
-- the jobs on the ready lists, counted once (each LLEN is a call) and kept up to date
local ready
local function ready_now()
  ready = ready or ready_len()
  return ready
end
local replies = {}
local counts = {enqueued = 0, deduplicated = 0, conflicts = 0}
local function finish()
  for field, n in pairs(counts) do count(field, n) end
  return replies
end
for i = 9, #ARGV, 6 do
  local id, payload, hash, when, options, priority = ARGV[i], ARGV[i + 1], ARGV[i + 2],
    ARGV[i + 3], ARGV[i + 4], ARGV[i + 5]
  local key = jobkey(id)
  local due
  if when ~= '' then
    due = tonumber(string.sub(when, 2))
    if string.sub(when, 1, 1) == 'd' then due = NOW + due end
    if due <= NOW then due = nil end
  end
  local existing = redis.call('HGET', key, 'h')
  if existing and KEY_TTL_MS and BORN and (tonumber(redis.call('HGET', key, 'c')) or 0) < BORN
    and not redis.call('ZSCORE', K_EXP, id) and not redis.call('ZSCORE', K_SCHED, id)
    and redis.call('PTTL', key) > 0
    and not is_finished(redis.call('HGET', key, 's')) then
    -- a job of an earlier life of this queue, which expired unfed: its record lingers
    -- until its own TTL, but nothing refers to it any more (see keep); this id starts
    -- a new job. A record made in the queue's present life is never such a ghost.
    redis.call('DEL', key)
    count('expired')
    existing = nil
  end
  if existing then
    if existing == hash then
      counts.deduplicated = counts.deduplicated + 1
      replies[#replies + 1] = 'dup'
      local found = redis.call('HMGET', key, 'q', 's')
      replies[#replies + 1] = found[2] == 'scheduled' and 's' or found[1]
    else
      counts.conflicts = counts.conflicts + 1
      replies[#replies + 1] = 'conflict'
      replies[#replies + 1] = existing
    end
  elseif not due and mode ~= 'submit' and ready_now() >= CAPACITY then
    replies[#replies + 1] = 'full'
    replies[#replies + 1] = tostring(CAPACITY)
    if mode == 'wait' then return finish() end
  else
    redis.call('ZREM', K_FIN, id)  -- an earlier job of this id may have expired
    redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0,
      'c', stamp(NOW), 't', '', 'lf', life_from())
    if options ~= '' then redis.call('HSET', key, 'o', options) end
    if priority ~= '' then redis.call('HSET', key, 'pr', priority) end
    counts.enqueued = counts.enqueued + 1
    replies[#replies + 1] = 'new'
    if K_STREAM then
      -- no MAXLEN: trimming would drop entries some group has not read yet
      ensure_group()
      local entry = redis.call('XADD', K_STREAM, '*', 'id', id, 'payload', payload, 'hash', hash)
      redis.call('HSET', key, 'e', entry, 'q', 1, 'r', stamp(NOW), 'u', stamp(NOW))
      replies[#replies + 1] = '1'
    elseif due then
      redis.call('HSET', key, 's', 'scheduled', 'r', stamp(NOW))
      defer(id, due)
      replies[#replies + 1] = 's'
    else
      local queued = schedule(id, false, ready_now(), LEVELS[3 - (tonumber(priority) or 0)])
      ready = ready + queued
      replies[#replies + 1] = tostring(queued)
    end
  end
end
return finish()
