-- Wait for jobs to finish (RedisBackend.finished). ARGV[8..]: job ids. A job not
-- finished yet gets 'wt' on its record, so that when it finishes its id goes on the
-- events stream (see ended); one finished already, or unknown, is not marked.
-- Returns, per id: 0 unknown (never enqueued, or forgotten), 1 finished, 2 waited for.
local out = {}
for i = 8, #ARGV do
  local key = jobkey(ARGV[i])
  local state = redis.call('HGET', key, 's')
  if not state then
    out[#out + 1] = 0
  elseif is_finished(state) then
    out[#out + 1] = 1
  else
    redis.call('HSET', key, 'wt', '1')
    out[#out + 1] = 2
  end
end
return out
