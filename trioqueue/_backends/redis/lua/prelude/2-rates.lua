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

-- A rate key's times, in '<queue>.rate:<key>': the starts made (a theoretical arrival
-- time) and how many jobs wait for a start promised to them, with the limit they were
-- kept under (under another limit they count for nothing). Returns started, pending.
local function key_times(rate_key)
  local started, pending, limit = string.match(redis.call('GET', RATE_PREFIX .. rate_key) or '',
    '^(%S+) (%S+) (.*)$')
  if not KEY_RATE or limit ~= KEY_RATE[3] then return 0, 0 end
  return tonumber(started) or 0, tonumber(pending) or 0
end
-- Keep a rate key's times as long as they limit anything: until the last promised
-- start has come (a count left too high by a record deleted by hand goes with it).
-- The time to keep them is capped at 2^50 ms (about 35,000 years): a longer one,
-- from many jobs waiting under a long window, is more than SET PX takes.
local function keep_key_times(rate_key, started, pending)
  local last = math.max(started, NOW) + pending * KEY_RATE[1]
  if last <= NOW then
    redis.call('DEL', RATE_PREFIX .. rate_key)
  else
    local ms = math.min(math.ceil((last - NOW) * 1000) + 1, 2 ^ 50)
    redis.call('SET', RATE_PREFIX .. rate_key,
      exact(started) .. ' ' .. pending .. ' ' .. KEY_RATE[3], 'PX', ms)
  end
end
-- A job that waited for a start promised to it ('rr' on its record, whose key is
-- record) ends without it (cancelled, a dead letter): its key's next waiter moves up.
local function unpromise(record, rate_key)
  redis.call('HDEL', record, 'rr')
  if not (KEY_RATE and rate_key) then return end
  local started, pending = key_times(rate_key)
  if pending > 0 then keep_key_times(rate_key, started, pending - 1) end
end
