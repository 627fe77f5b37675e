-- Accept jobs in order, or find the existing ones. ARGV[8]: the mode; then each job as
-- seven arguments: id, payload, payload hash, due time ('' for ready at once, 'd' and
-- seconds from now, or 'a' and seconds since the epoch on the server's clock), its
-- options ('' for none, else a JSON object: max_attempts, handler timeout, task
-- name; kept as the job's 'o', unread here, and handed out with each claim), its
-- priority ('' for 0; kept as 'pr': which ready list it waits on), and its extras:
-- '' for none, else a JSON object of 'a', the ids of the jobs it runs after (kept as
-- 'dp'), 'u', its unique key (kept as 'uk'), 'b': 1 when it is debounced, and 'r',
-- its rate key (kept as 'rk', read by claim.lua's key_allows).
-- Returns two values per job handled: {'new' | 'dup', the job's mark: a letter for
-- its state (STATE_MARKS below: 'x' for a new one that is a dead letter at once,
-- one of the jobs it runs after having ended without completing) and 1 or 0 for
-- whether it is on a ready list}, {'keyed', the mark of the job that holds the
-- unique key followed by its id},
-- {'conflict', the stored hash}, {'noparent', the id it runs after that is unknown}
-- or {'full', capacity}. A delayed job, or one that waits for others, takes no room
-- until it is ready, so it never finds the queue full. In
-- 'wait' mode the first 'full' ends the call: the caller waits for room and sends the
-- rest again; in 'nowait' mode the rest are still looked at (a duplicate is found even
-- when the queue is full); 'submit' never meets a full queue.
local mode = ARGV[8]
-- the dead list, the deferred set and the unique keys are not among the keys
-- checked for every add
for i = 9, #ARGV, 7 do
  if ARGV[i + 6] ~= '' then
    local refused = wrong_kind(4) or wrong_kind(20) or wrong_kind(21)
    if refused then return refused end
    break
  end
end
-- What a job's receipt says of it (see the returns above): its state's letter, then
-- 1 when it is on a ready list, else 0.
local STATE_MARKS = {received = 'e', scheduled = 's', deferred = 'w', processing = 'p',
  failed_retry = 'r', failed = 'x', completed = 'c', dropped = 'd', cancelled = 'k'}
local function mark(state, queued)
  -- never nil: a nil would cut the reply short, or fail a '..'
  return (STATE_MARKS[state] or 'e') .. (queued == '1' and '1' or '0')
end
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
for i = 9, #ARGV, 7 do
  local id, payload, hash, when, options, priority, extras = ARGV[i], ARGV[i + 1],
    ARGV[i + 2], ARGV[i + 3], ARGV[i + 4], ARGV[i + 5], ARGV[i + 6]
  local after, unique, debounce, rate_key = nil, nil, false, nil
  if extras ~= '' then
    extras = cjson.decode(extras)
    after, unique, debounce, rate_key = extras.a, extras.u, extras.b == 1, extras.r
  end
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
  -- the jobs it runs after that have not completed (wait), the first unknown one
  -- (missing), the first that ended otherwise and how (ended)
  local wait, missing, ended, how = {}, nil, nil, nil
  if not existing and after then
    for _, parent in ipairs(after) do
      local state = redis.call('HGET', jobkey(parent), 's')
      if not state then
        missing = missing or parent
      elseif state ~= 'completed' then
        wait[#wait + 1] = parent
        if ENDED_HOW[state] and not ended then ended, how = parent, ENDED_HOW[state] end
      end
    end
  end
  -- the job waiting or running that holds its unique key, unless it replaces it
  local holder
  if not existing and unique then
    holder = redis.call('HGET', K_UNIQUE, unique)
    local held = holder and redis.call('HMGET', jobkey(holder), 's', 'q', 'db')
    if not held or not held[1] or is_finished(held[1]) then
      holder = nil  -- none; or a record gone with the key TTL
    elseif debounce and held[1] == 'scheduled' and held[3] then
      -- replaced: the newer job waits in its place
      redis.call('ZREM', K_SCHED, holder)
      cancel_now(holder, "replaced by job '" .. id .. "', enqueued later with the same unique_key")
      holder = nil
    else
      holder = mark(held[1], held[2]) .. holder
    end
  end
  if existing then
    if existing == hash then
      counts.deduplicated = counts.deduplicated + 1
      replies[#replies + 1] = 'dup'
      local found = redis.call('HMGET', key, 'q', 's')
      replies[#replies + 1] = mark(found[2], found[1])
    else
      counts.conflicts = counts.conflicts + 1
      replies[#replies + 1] = 'conflict'
      replies[#replies + 1] = existing
    end
  elseif holder then
    counts.deduplicated = counts.deduplicated + 1
    replies[#replies + 1] = 'keyed'
    replies[#replies + 1] = holder
  elseif missing then
    replies[#replies + 1] = 'noparent'
    replies[#replies + 1] = missing
  elseif #wait == 0 and not due and mode ~= 'submit' and ready_now() >= CAPACITY then
    replies[#replies + 1] = 'full'
    replies[#replies + 1] = tostring(CAPACITY)
    if mode == 'wait' then return finish() end
  else
    redis.call('ZREM', K_FIN, id)  -- an earlier job of this id may have expired
    redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0,
      'c', stamp(NOW), 't', '', 'lf', life_from())
    if options ~= '' then redis.call('HSET', key, 'o', options) end
    if priority ~= '' then redis.call('HSET', key, 'pr', priority) end
    if after then redis.call('HSET', key, 'dp', cjson.encode(after)) end
    -- its rate key, and its place among the queue's jobs: where it stands in the key's
    -- line if it comes to wait in one (claim.lua's key_allows)
    if rate_key then redis.call('HSET', key, 'rk', rate_key, 'ro', redis.call('INCR', K_SEQ)) end
    if unique then
      redis.call('HSET', key, 'uk', unique)
      redis.call('HSET', K_UNIQUE, unique, id)
      if debounce then redis.call('HSET', key, 'db', 1) end
    end
    counts.enqueued = counts.enqueued + 1
    replies[#replies + 1] = 'new'
    if ended then
      dead_at_once(id, ended, how)
      replies[#replies + 1] = 'x0'
    elseif #wait > 0 then
      redis.call('HSET', key, 's', 'deferred', 'q', 0, 'r', stamp(NOW), 'dw', #wait)
      -- in the order they came, as the memory backend keeps them
      redis.call('ZADD', K_DEFER, redis.call('HINCRBY', K_CONF, 'arrivals', 1), id)
      for _, parent in ipairs(wait) do follow(parent, id) end
      -- no key TTL: it lives as long as the jobs it waits for, which may be claimed
      -- (and a claimed job never expires); it goes with the key TTL once released
      feed()
      replies[#replies + 1] = 'w0'
    elseif K_STREAM then
      -- no MAXLEN: trimming would drop entries some group has not read yet
      ensure_group()
      local entry = redis.call('XADD', K_STREAM, '*', 'id', id, 'payload', payload, 'hash', hash)
      redis.call('HSET', key, 'e', entry, 'q', 1, 'r', stamp(NOW), 'u', stamp(NOW))
      replies[#replies + 1] = 'e1'
    elseif due then
      redis.call('HSET', key, 's', 'scheduled', 'r', stamp(NOW))
      defer(id, due)
      replies[#replies + 1] = 's0'
    else
      local queued = schedule(id, false, ready_now(), LEVELS[3 - (tonumber(priority) or 0)])
      ready = ready + queued
      replies[#replies + 1] = 'e' .. queued
    end
  end
end
return finish()
