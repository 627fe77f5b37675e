-- Read the events stream (see ended) after entry ARGV[8]; '' for none, only the
-- position to read from: the newest entry's id ('0-0' when there is none).
-- Returns {the position after what it read, the job ids it read (at most 1000)}.
local after = ARGV[8]
if after == '' then
  local last = redis.call('XREVRANGE', K_EVENTS, '+', '-', 'COUNT', 1)[1]
  return {last and last[1] or '0-0', {}}
end
local entries = redis.call('XRANGE', K_EVENTS, '(' .. after, '+', 'COUNT', 1000)
local ids = {}
for i, entry in ipairs(entries) do
  ids[i] = entry[2][2]
  after = entry[1]
end
return {after, ids}
