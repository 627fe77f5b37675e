-- Prelude, part 4: jobs that come from outside trioqueue (elements other clients
-- pushed on the list, and a stream source's entries).

-- Turn an element pushed by another client into a job record. Each push is a job
-- of its own (two identical pushes run twice, as a plain list would run them): its
-- id is 'raw-' and the next number of the claim-token sequence (skipping an id a
-- producer chose), its payload hash the SHA-1 of its content. A producer that
-- wants pushes deduplicated gives ids, through the library or `trioqueue enqueue`.
-- Returns the id, or nil when the element does not decode (then it is dead-lettered
-- with the reason).
local function adopt(element)
  local id, key
  repeat
    id = 'raw-' .. redis.call('INCR', K_SEQ)
    key = jobkey(id)
  until redis.call('EXISTS', key) == 0
  redis.call('ZREM', K_FIN, id)
  redis.call('HSET', key, 'p', element, 'h', 'raw:' .. redis.sha1hex(element), 's', 'received',
    'a', 0, 'q', 0, 'c', stamp(NOW), 'u', stamp(NOW), 'r', stamp(NOW), 't', '',
    'lf', life_from())
  count('enqueued')
  local ok, err = pcall(cjson.decode, element)
  if not ok then
    redis.call('HSET', key, 's', 'failed', 'w',
      'undecodable record: not JSON (' .. tostring(err) .. ')')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    return nil
  end
  return id
end

-- Whether an element refers to a job whose record expired with the key TTL: such
-- an element is forgotten and counted, not mistaken for another client's payload.
local function expired_reference(element)
  return KEY_TTL_MS and string.sub(element, 1, 1) == MARK
    and redis.call('EXISTS', jobkey(string.sub(element, 2))) == 0
end

-- --- stream sources -------------------------------------------------------------

-- Create the group if it was never made here: from GROUP_START ('$': entries added
-- from now on; '0': the whole stream), or from the start when it existed before and
-- was deleted by hand (its position is lost; better twice than never).
local function ensure_group(again)
  if not again and redis.call('HGET', K_CONF, 'group') == '1' then return end
  local made = redis.pcall('XGROUP', 'CREATE', K_STREAM, GROUP, again and '0' or GROUP_START,
    'MKSTREAM')
  if type(made) == 'table' and made.err and not string.find(made.err, 'BUSYGROUP') then
    error(made.err)
  end
  redis.call('HSET', K_CONF, 'group', '1')
end

-- A job that came from the stream is done (completed, dropped or dead-lettered):
-- acknowledge its entry, and delete it if asked to.
local function entry_done(id)
  if not K_STREAM then return end
  local entry = redis.call('HGET', jobkey(id), 'e')
  if not entry then return end
  redis.call('XACK', K_STREAM, GROUP, entry)
  if DELETE_DONE then redis.call('XDEL', K_STREAM, entry) end
end

-- The job an entry carries. An entry trioqueue added (fields id, payload, hash; the id
-- not empty) is the job of that id, in every group that reads it; any other entry is a job whose
-- id is the entry's, and whose payload is the entry: its fields as an object of
-- strings. (A trioqueue entry whose id this group already gave another entry gets
-- the entry's id too.) deliveries: how often the group delivered the entry already.
-- Returns the id (nil when the payload does not decode: it is then a dead letter
-- with the reason), and whether the job is new here.
local function entry_job(entry, fields, deliveries)
  local named = {}
  for i = 1, #fields, 2 do named[fields[i]] = fields[i + 1] end
  local id, payload, hash = named['id'], named['payload'], named['hash']
  local ours = #fields == 6 and id and id ~= '' and payload and hash  -- '' is no job's id
  if ours then
    local seen = redis.call('HGET', jobkey(id), 'e')
    if seen == entry then return id, false end  -- enqueued through this group, or adopted
    if seen then ours = false end
  end
  if not ours then
    id = entry
    if redis.call('EXISTS', jobkey(id)) == 1 then return id, false end  -- adopted before
    payload = cjson.encode(named)
    hash = 'raw:' .. redis.sha1hex(payload)
  end
  local key = jobkey(id)
  redis.call('ZREM', K_FIN, id)
  redis.call('HSET', key, 'p', payload, 'h', hash, 's', 'received', 'a', 0, 'd', deliveries,
    'q', 1, 'c', stamp(NOW), 'u', stamp(NOW), 'r', stamp(NOW), 't', '', 'lf', life_from(),
    'e', entry)
  count('enqueued')
  local ok, err = pcall(cjson.decode, payload)
  if not ok then
    redis.call('HSET', key, 's', 'failed', 'q', 0, 'w',
      'undecodable record: not JSON (' .. tostring(err) .. ')')
    redis.call('LPUSH', K_DEAD, id)
    count('dead_lettered')
    entry_done(id)
    return nil, true
  end
  return id, true
end

-- Entries of the stream the group has not read yet (its lag): what waits to be
-- claimed, besides the ready list. When Redis cannot tell (entries deleted in the
-- range), count them, up to SLICE.
local function stream_waiting()
  if not K_STREAM or redis.call('EXISTS', K_STREAM) == 0 then return 0 end
  local groups = redis.call('XINFO', 'GROUPS', K_STREAM)
  for _, group in ipairs(groups) do
    local info = {}
    for i = 1, #group, 2 do info[group[i]] = group[i + 1] end
    if info['name'] == GROUP then
      if info['lag'] then return tonumber(info['lag']) end
      return #redis.call('XRANGE', K_STREAM, '(' .. info['last-delivered-id'], '+', 'COUNT',
        SLICE)
    end
  end
  -- no group yet: from '$' nothing there now will be read; one deleted by hand is
  -- made again from the start (ensure_group)
  local again = redis.call('HGET', K_CONF, 'group') == '1'
  return (again or GROUP_START == '0') and redis.call('XLEN', K_STREAM) or 0
end

-- Entries the group has delivered and nobody acknowledged yet: every stream job
-- claimed or waiting to run again, and entries another program's consumer read and
-- left (taken over by the sweep once idle for a lease).
local function stream_pending()
  if not K_STREAM or redis.call('EXISTS', K_STREAM) == 0 then return 0 end
  local found = redis.pcall('XPENDING', K_STREAM, GROUP)
  if type(found) ~= 'table' or found.err then return 0 end  -- no group (yet)
  return tonumber(found[1])
end
