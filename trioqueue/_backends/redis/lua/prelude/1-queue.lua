-- Shared by every trioqueue script, read in five parts in the order of their names;
-- part 1: the queue's keys, the arguments and the shared settings, each key's
-- type checked. All keys of a queue share one hash slot.
-- KEYS: ready, processing, claims, dead, unqueued, finished, stats, sequence, config,
--       suspects, held, retrying, scheduled, events, the ready lists of priorities
--       +2, +1, -1 and -2, expiry, deferred, unique, failing; for a stream source
--       also the stream and its wake stream
-- ARGV: job key prefix, clock ('' = the server's TIME), capacity,
--       retention count ('' = none), retention age ('' = none), mode ('reliable' or
--       'simple'), key TTL in seconds ('' = none), then taken out here: the caller's
--       min_idle, and for a stream source its group, consumer, group start ('$' or
--       '0') and '1' to delete entries once done ('' for a list queue); then the
--       script's own from ARGV[8].
local K_READY, K_PROC, K_CLAIMS, K_DEAD = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_UNQ, K_FIN, K_STATS, K_SEQ, K_CONF = KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
-- jobs a dead worker held that had been delivered before: each runs alone
local K_SUS = KEYS[10]
-- Claimed jobs live in the claims set (scored by lease expiry), the held set (scored
-- by claim time: the oldest claim in one step) and, while one waits out a retry
-- backoff, the retrying set. The processing list holds only what a BLMOVE moved and
-- no claim registered yet: a few elements, so no script walks anything that grows
-- with the jobs in flight.
local K_HELD, K_RETRY = KEYS[11], KEYS[12]
-- Jobs waiting for their due time (delayed jobs), scored by it on the server's clock.
local K_SCHED = KEYS[13]
-- The ids of finished jobs someone waits for (see ended), read by RedisBackend.finished.
local K_EVENTS = KEYS[14]
-- The ready lists by priority, highest first; K_READY is priority 0's. A claim takes
-- the first that holds a job. A consumer waiting for work blocks on K_READY alone,
-- so a job put on another level when K_READY is empty pushes the wake element there
-- (see wake_for_levels).
local LEVELS = {KEYS[15], KEYS[16], K_READY, KEYS[17], KEYS[18]}
-- With a key TTL: the waiting jobs' ids, scored by when their records expire (see keep)
local K_EXP = KEYS[19]
-- Jobs waiting for the jobs they run after (add.lua's after), scored by when they came.
local K_DEFER = KEYS[20]
-- Each unique key held (add.lua) to the id of the job holding it, until it ends (ended).
local K_UNIQUE = KEYS[21]
-- Followers of jobs that ended without completing, still to be made dead letters
-- (see fail_followers): each entry a follower, the job it waited for and how that ended.
local K_FAIL = KEYS[22]
-- Every key a script uses must hold what trioqueue puts there (or nothing yet): a key
-- changed by hand is refused here, before any write, never half-way through a script.
-- CHECKED (set ahead of this prelude) names the keys a script uses, by position, when
-- it uses fewer than all (each TYPE costs a hot script several per cent of its time).
local KINDS = {'list', 'list', 'zset', 'list', 'list', 'zset', 'hash', 'string', 'hash', 'list',
  'zset', 'set', 'zset', 'stream', 'list', 'list', 'list', 'list', 'zset', 'zset', 'hash',
  'list'}
local checked = CHECKED or {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19,
  20, 21, 22}
if KEYS[23] then
  KINDS[23], KINDS[24] = 'stream', 'stream'
  checked[#checked + 1], checked[#checked + 2] = 23, 24
end
-- The refusal of key i, if it holds what this queue does not keep there; else nil.
local function wrong_kind(i)
  local found = redis.call('TYPE', KEYS[i])['ok']
  if found ~= 'none' and found ~= KINDS[i] then
    return redis.error_reply('TRIOQUEUE_KEY ' .. KEYS[i] .. ' holds a ' .. found
      .. ', where this queue keeps a ' .. KINDS[i])
  end
end
-- Most of these keys are absent in a working queue (Redis deletes an emptied list or
-- set): one EXISTS over those tells that none of them is there, and then none needs
-- a TYPE of its own (each is a call). The others are checked one by one.
local USUALLY_THERE = {[1] = true, [3] = true, [4] = true, [6] = true, [7] = true, [8] = true,
  [9] = true, [11] = true}
local seldom = {}
for _, i in ipairs(checked) do
  if USUALLY_THERE[i] then
    local refused = wrong_kind(i)
    if refused then return refused end
  else
    seldom[#seldom + 1] = i
  end
end
if #seldom > 0 then
  local names = {}
  for n, i in ipairs(seldom) do names[n] = KEYS[i] end
  if redis.call('EXISTS', unpack(names)) > 0 then
    for _, i in ipairs(seldom) do
      local refused = wrong_kind(i)
      if refused then return refused end
    end
  end
end
local PREFIX = ARGV[1]
local NOW
if ARGV[2] ~= '' then
  NOW = tonumber(ARGV[2])
else
  local t = redis.call('TIME')
  NOW = tonumber(t[1]) + tonumber(t[2]) / 1000000
end
local CAPACITY = tonumber(ARGV[3])
local KEEP = tonumber(ARGV[4])
local MAX_AGE = tonumber(ARGV[5])
-- A simple queue's claims leave every list; the claims set alone holds their leases.
local SIMPLE = ARGV[6] == 'simple'
-- the caller's lease: it tells how long a silence must be to be an outage (below)
local MIN_IDLE = tonumber(table.remove(ARGV, 8))
-- A stream source: jobs come from K_STREAM through consumer group GROUP, which this
-- process reads as CONSUMER; the ready list holds only jobs to deliver again.
local K_STREAM, K_WAKE = KEYS[23], KEYS[24]
local GROUP = table.remove(ARGV, 8)
local CONSUMER = table.remove(ARGV, 8)
local GROUP_START = table.remove(ARGV, 8)
local DELETE_DONE = table.remove(ARGV, 8) == '1'
-- With a key TTL, every push keeps the queue alive for KEY_TTL more seconds, and a
-- waiting job's record lives that long after it was queued: an unfed queue expires
-- with the jobs in it. Claimed jobs and dead letters never expire.
local KEY_TTL_MS
if ARGV[7] ~= '' then KEY_TTL_MS = math.ceil(tonumber(ARGV[7]) * 1000) end

-- The queue's shared settings live in its config hash: the first script that
-- writes stores the caller's, and from then on every script follows the stored
-- ones, whatever its caller was told (RedisBackend checks a caller's own against
-- them when it connects), so a process keeps working when the queue is configured
-- anew under it (configure.lua).
local SHARED = {'capacity', 'mode', 'key_ttl'}
local agreed = redis.call('HMGET', K_CONF, 'capacity', 'mode', 'key_ttl', 'wake', 'source',
  'born', 'paused', 'rate', 'rate_tat', 'key_rate')
-- A stream's group keeps its keys under '<stream>:<group>', the names a list queue of
-- that name has too: the keys belong to the kind of source that wrote first.
local SOURCE = KEYS[23] and 'stream' or 'list'
if agreed[5] and agreed[5] ~= SOURCE then
  return redis.error_reply('TRIOQUEUE_SOURCE ' .. agreed[5])
end
if agreed[1] and not agreed[5] and not READ_ONLY then
  redis.call('HSET', K_CONF, 'source', SOURCE)  -- a queue from before sources were stored
end
if agreed[1] then
  CAPACITY = tonumber(agreed[1])
  SIMPLE = agreed[2] == 'simple'
  KEY_TTL_MS = nil
  if agreed[3] and agreed[3] ~= '' then KEY_TTL_MS = math.ceil(tonumber(agreed[3]) * 1000) end
elseif not READ_ONLY then
  redis.call('HSET', K_CONF, 'capacity', ARGV[3], 'mode', ARGV[6], 'key_ttl', ARGV[7],
    'source', SOURCE, 'born', string.format('%.6f', NOW))
end
-- When the queue's settings were stored: a queue with a key TTL that expired unfed
-- is born again, and a record made before then belongs to its earlier life (see
-- add.lua). None for a queue from before this was stored.
local BORN = tonumber(agreed[6]) or (not agreed[1] and NOW) or nil
-- A paused queue (pause.lua) takes jobs in and gives none out: claims take nothing.
local PAUSED = agreed[7] == '1'
-- A rate limit (rate_limit.lua) stored as '<starts> <per> <burst>': {interval, tolerance,
-- the stored text, slack}, or nil for none; see trioqueue/_rate.py for the arithmetic
-- (GCRA), and its RateLimit.slack for the float error it forgives.
local function rate_limit(stored)
  local starts, per, burst = string.match(stored or '', '^(%S+) (%S+) (%S+)$')
  starts, per, burst = tonumber(starts), tonumber(per), tonumber(burst)
  if not (starts and per and burst) then return nil end
  return {per / starts, (burst - 1) * (per / starts), stored, 1e-6 * burst}
end
-- The queue's limit on every start, with its theoretical arrival time; the limit on
-- the starts of each rate key's jobs, whose times live in '<queue>.rate:<key>' and
-- whose line in '<queue>.rateline:<key>' (2-rates.lua).
local RATE, RATE_TAT, KEY_RATE = rate_limit(agreed[8]), tonumber(agreed[9]), rate_limit(agreed[10])
local RATE_PREFIX = string.sub(PREFIX, 1, -5) .. 'rate:'
local RATE_LINE_PREFIX = string.sub(PREFIX, 1, -5) .. 'rateline:'
-- A stream has no capacity: XADD never waits, and nothing bounds redeliveries.
if K_STREAM then CAPACITY = math.huge end
-- List elements that reference a job record start with this byte; anything else
-- was pushed by another client and is the payload itself.
local MARK = '\0'
-- The mark alone is no job: it is the wake element (see defer), which the ready list
-- holds at most once, while the config hash's 'wake' says so; it takes no room.
local WAKE = MARK
local woken = agreed[4] == '1'
