-- Prelude, part 2 (rates): the rate limits' arithmetic, as trioqueue/_rate.py's room,
-- start_at and charge (a limit is {interval, tolerance, its stored text, slack}; a
-- time of 0 is one never set), and each rate key's times under the per-key limit
-- (KEY_RATE). Times are seconds since the epoch, where floats are about 2.4e-7 apart:
-- the arithmetic forgives a microsecond per start of a burst (the slack), and a wait
-- is never shorter than the slack.
local function rate_room(tat, limit)
  local ahead = math.max(tat, NOW) - NOW
  if ahead > limit[2] + limit[4] then return 0 end
  return math.floor((limit[2] + limit[4] - ahead) / limit[1]) + 1
end
local function rate_charge(tat, limit, n) return math.max(tat, NOW) + n * limit[1] end
-- When a start is allowed: NOW if one is now.
local function rate_start_at(tat, limit)
  if rate_room(tat, limit) > 0 then return NOW end
  return math.max(tat - limit[2], NOW + limit[4])
end
local function exact(n) return string.format('%.17g', n) end

-- A rate key's line under the per-key limit, as trioqueue/_rate.py's KeyLine: its
-- starts made (a theoretical arrival time) in '<queue>.rate:<key>', with the limit
-- they were kept under (under another they count for nothing), and the jobs over the
-- limit that wait for their turn in '<queue>.rateline:<key>', a sorted set of ids
-- scored in the order they were enqueued. Returns started.
local function key_times(rate_key)
  local started, limit = string.match(redis.call('GET', RATE_PREFIX .. rate_key) or '',
    '^(%S+) (.*)$')
  if not KEY_RATE or limit ~= KEY_RATE[3] then return 0 end
  return tonumber(started) or 0
end
-- Keep a rate key's times a minute beyond the last start they hold back (once it has
-- come they limit nothing, and a minute more spares a start to a clock a little
-- behind the server's), and its line an hour beyond the last turn it gave out. The
-- times to keep them are capped at 2^50 ms (about 35,000 years): a longer one, from
-- many jobs waiting under a long window, is more than SET PX takes.
local function keep_key_times(rate_key, started)
  local line = RATE_LINE_PREFIX .. rate_key
  local last = math.max(started, NOW) + redis.call('ZCARD', line) * KEY_RATE[1]
  if started <= NOW then
    redis.call('DEL', RATE_PREFIX .. rate_key)
  else
    redis.call('SET', RATE_PREFIX .. rate_key, exact(started) .. ' ' .. KEY_RATE[3], 'PX',
      math.min(math.ceil((started - NOW) * 1000) + 60000, 2 ^ 50))
  end
  if last > NOW then
    redis.call('PEXPIRE', line, math.min(math.ceil((last - NOW) * 1000) + 3600000, 2 ^ 50))
  end
end
-- How many jobs wait ahead of job id in its key's line: those before it, or for one
-- not in it those enqueued before it (all of them for a record without its order).
-- A first in line whose record no longer waits for its turn (deleted or changed by
-- hand) leaves the line.
local function line_ahead(line, id, order)
  while true do
    local first = redis.call('ZRANGE', line, 0, 0)[1]
    if not first or first == id then return 0 end
    if redis.call('HGET', PREFIX .. first, 'rr') then
      local rank = redis.call('ZRANK', line, id)
      if rank then return rank end
      if tonumber(order) then return redis.call('ZCOUNT', line, '-inf', '(' .. order) end
      return redis.call('ZCARD', line)
    end
    redis.call('ZREM', line, first)
  end
end
-- Job id takes its place in its key's line, unless it holds one: by the order its
-- job was enqueued in (add.lua's 'ro'), so that a job another consumer's BLMOVE held
-- while a claim put later ones in line still goes ahead of them; at the back for a
-- record without one.
local function line_join(line, id, order)
  if redis.call('ZSCORE', line, id) then return end
  if not tonumber(order) then
    order = (tonumber(redis.call('ZRANGE', line, -1, -1, 'WITHSCORES')[2]) or 0) + 1
  end
  redis.call('ZADD', line, order, id)
end
-- A job that waited in its key's line ('rr' on its record) ends without its start
-- (cancelled, a dead letter): the jobs behind it move up.
local function unpromise(id, rate_key)
  redis.call('HDEL', PREFIX .. id, 'rr')
  if rate_key then redis.call('ZREM', RATE_LINE_PREFIX .. rate_key, id) end
end
