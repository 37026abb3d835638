-- enqueue.lua: queue N jobs (enqueue is N = 1), each deduped by its id and by its live key.
--
-- ARGV[1] now, ARGV[2] wake channel ('' for none), ARGV[3] wake slot ms, ARGV[4] wake due
-- horizon ms; then 16 arguments per job:
--   id, run_id, name, queue, tenant_id (opt), idempotency_key, live key, max_attempts,
--   run_at (opt; with a debounce the driver already made it at least now + debounce),
--   input JSON, traceparent (opt), enqueued_by (opt), debounce ms (opt), unique_for ms (opt),
--   priority (0..9: the row goes to that band's due zset, prelude.lua's due_key),
--   debounce seq (opt; only with a debounce: EnqueueRequest.debounce_seq)
-- Returns a flat list: id, run_id, deduped (0/1), debounced (0/1) per job, in the order given.
--
-- The wake, announced here when a channel is given: each queue that got a row due within the
-- horizon is PUBLISHed on the channel (payload: the queue name only) — from inside the
-- script, so a worker hears it while the enqueuer is still reading its reply, with no second
-- command. At most once per queue per slot of the driver's clock, fleet-wide: {p}:w:<queue>
-- holds the last announced slot; a different slot announces again (a clock behind another
-- enqueuer's never silences it).
--
-- An id that already names a row (live or finished) inserts nothing and answers that row, so
-- an outbox republish meets the job its first publish made. A live row holding the same
-- (name, tenant or '', key) answers the same way, unless the job carries a debounce and that
-- row is still waiting to start (ready or delayed, never claimed): then the row is moved to
-- this job's run_at, takes its input, and is answered deduped and debounced (unless both carry
-- a debounce seq, the row's 'dseq', and this job's is not above it: then it only dedupes, so a
-- stream message delivered again never puts its older input back). With no live
-- holder, a job with unique_for is answered by the done run its key's marker {p}:u:<live key>
-- names (written by ack.lua for a run enqueued with unique_for) when that run finished after
-- now - unique_for. Rows in one call see the rows before them.

local now = tonumber(ARGV[1])
local channel = ARGV[2]
local slot_ms = tonumber(ARGV[3])
local horizon = tonumber(ARGV[4])
local live = base .. ':live'
local out = {}
local due_queues = {}
local STRIDE = 16
local WAKE_KEY_TTL_MS = 60000

-- Per row, only what is the row's own: the read of its id's hash and the write of it. What
-- every row of the call shares (the live index, the seq counter, the due zsets, the queue
-- set, the tallies) is read once before the walk or gathered in it and written once per key
-- after it: a key touched per row is a command, a lookup of the keyspace and, while Redis
-- grows its table, a rehash step, per row. No row reads the gathered writes back from Redis:
-- `placed` answers the live keys this call inserted, and the due zsets are only written.
local placed = {}      -- live key -> id of the row this call inserted under it
local live_pairs = {}  -- live key, id pairs, in insertion order
local dues = {}        -- zset key -> score, member pairs in order (a member moved twice keeps
                       -- its last score: ZADD takes its pairs in order)
local groups = {}      -- band tenant-set key -> { group -> true }
local new_queues = {}
local tallies = {}     -- queue -> state -> delta
local seq = nil        -- the last seq handed out (INCR on the first insert, INCRBY the rest)
local inserted = 0

local function gather_due(queue, band, tenant, run_at, member)
  local group = tenant or ''
  local b = tonumber(band) or 0
  for _, key in ipairs({ due_key(queue, b), tenant_due_key(queue, b, group) }) do
    local pairs_ = dues[key]
    if pairs_ == nil then
      pairs_ = {}
      dues[key] = pairs_
    end
    pairs_[#pairs_ + 1] = run_at
    pairs_[#pairs_ + 1] = member
  end
  local set = tenants_key(queue, b)
  if groups[set] == nil then
    groups[set] = {}
  end
  groups[set][group] = true
end

local function gather_tally(queue, from, to)
  local per = tallies[queue]
  if per == nil then
    per = {}
    tallies[queue] = per
  end
  if from ~= nil then
    per[from] = (per[from] or 0) - 1
  end
  per[to] = (per[to] or 0) + 1
end

-- The live index, read once: the holder of every row's live key (false: none).
local holders = {}
do
  local lks = {}
  for i = 5, #ARGV, STRIDE do
    lks[#lks + 1] = ARGV[i + 6]
  end
  for i = 1, #lks, CHUNK do
    local got = redis.call('HMGET', live, unpack(lks, i, math.min(i + CHUNK - 1, #lks)))
    for _, holder in ipairs(got) do
      holders[#holders + 1] = holder
    end
  end
end

for i = 5, #ARGV, STRIDE do
  local row_index = (i - 5) / STRIDE + 1
  local id = ARGV[i]
  local run_id = ARGV[i + 1]
  local name = ARGV[i + 2]
  local queue = ARGV[i + 3]
  local tenant = opt(ARGV[i + 4])
  local key = ARGV[i + 5]
  local lk = ARGV[i + 6]
  local max_attempts = tonumber(ARGV[i + 7])
  local run_at = tonumber(opt(ARGV[i + 8])) or now
  local input = ARGV[i + 9]
  local traceparent = opt(ARGV[i + 10])
  local enqueued_by = opt(ARGV[i + 11])
  local debounce = tonumber(opt(ARGV[i + 12]))
  local unique_for = tonumber(opt(ARGV[i + 13]))
  local priority = tonumber(ARGV[i + 14])
  local dseq = tonumber(opt(ARGV[i + 15]))

  local jk = job_key(id)
  local existing = redis.call('HMGET', jk, 'id', 'run_id')
  if existing[1] then
    out[#out + 1] = existing[1]
    out[#out + 1] = existing[2]
    out[#out + 1] = 1
    out[#out + 1] = 0
  else
    local holder = placed[lk] or holders[row_index]
    local held = false
    if holder then
      held = redis.call('HMGET', job_key(holder), 'id', 'run_id', 'state', 'claim', 'queue', 'm',
        'priority', 'tenant_id', 'dseq')
    end
    local recent = false
    if not (held and held[1]) and unique_for ~= nil then
      local marker = redis.call('HMGET', base .. ':u:' .. lk, 'id', 'run_id', 'finished_at')
      if marker[1] and tonumber(marker[3]) > now - unique_for then
        recent = marker
      end
    end
    if held and held[1] then
      local debounced = 0
      local newer = dseq == nil or not held[9] or dseq > tonumber(held[9])
      if debounce ~= nil and (held[3] == 'ready' or held[3] == 'delayed')
          and tonumber(held[4]) == 0 and newer then
        local state = 'ready'
        if run_at > now then
          state = 'delayed'
        end
        redis.call('HSET', job_key(holder), 'run_at', run_at, 'state', state, 'input', input,
          'updated_at', now)
        if dseq ~= nil then
          redis.call('HSET', job_key(holder), 'dseq', dseq)
        end
        gather_due(held[5], held[7], held[8], run_at, held[6])
        if state ~= held[3] then
          gather_tally(held[5], held[3], state)
        end
        if run_at <= now + horizon then
          due_queues[held[5]] = true
        end
        debounced = 1
      end
      out[#out + 1] = held[1]
      out[#out + 1] = held[2]
      out[#out + 1] = 1
      out[#out + 1] = debounced
    elseif recent then
      out[#out + 1] = recent[1]
      out[#out + 1] = recent[2]
      out[#out + 1] = 1
      out[#out + 1] = 0
    else
      if seq == nil then
        seq = redis.call('INCR', base .. ':seq')
      else
        seq = seq + 1
      end
      inserted = inserted + 1
      local member = string.format('%015d', seq) .. id
      local state = 'ready'
      if run_at > now then
        state = 'delayed'
      end
      local fields = {
        'id', id, 'run_id', run_id, 'name', name, 'queue', queue, 'state', state,
        'input', input, 'key', key, 'lk', lk, 'attempt', 0, 'max_attempts', max_attempts,
        'run_at', run_at, 'created_at', now, 'updated_at', now, 'seq', seq, 'm', member,
        'claim', 0,
      }
      if tenant ~= nil then
        fields[#fields + 1] = 'tenant_id'
        fields[#fields + 1] = tenant
      end
      if traceparent ~= nil then
        fields[#fields + 1] = 'traceparent'
        fields[#fields + 1] = traceparent
      end
      if enqueued_by ~= nil then
        fields[#fields + 1] = 'enqueued_by'
        fields[#fields + 1] = enqueued_by
      end
      if unique_for ~= nil then
        fields[#fields + 1] = 'uf'
        fields[#fields + 1] = unique_for
      end
      if priority ~= 0 then
        fields[#fields + 1] = 'priority'
        fields[#fields + 1] = priority
      end
      if dseq ~= nil then
        fields[#fields + 1] = 'dseq'
        fields[#fields + 1] = dseq
      end
      redis.call('HSET', jk, unpack(fields))
      gather_due(queue, priority, tenant, run_at, member)
      placed[lk] = id
      live_pairs[#live_pairs + 1] = lk
      live_pairs[#live_pairs + 1] = id
      new_queues[queue] = true
      gather_tally(queue, nil, state)
      if run_at <= now + horizon then
        due_queues[queue] = true
      end
      out[#out + 1] = id
      out[#out + 1] = run_id
      out[#out + 1] = 0
      out[#out + 1] = 0
    end
  end
end

-- The gathered writes, one command per key.
if inserted > 1 then
  redis.call('INCRBY', base .. ':seq', inserted - 1)
end
for key, pairs_ in pairs(dues) do
  call_chunked('ZADD', key, pairs_)
end
for set, members in pairs(groups) do
  local scored = {}
  for group in pairs(members) do
    scored[#scored + 1] = 0
    scored[#scored + 1] = group
  end
  call_chunked('ZADD', set, scored)
end
call_chunked('HSET', live, live_pairs)
local names = {}
for queue in pairs(new_queues) do
  names[#names + 1] = queue
end
call_chunked('SADD', base .. ':queues', names)
-- Every (queue, state) a row moved, written even when its moves add up to 0, as the per-row
-- HINCRBYs did (a field they created reads 0 in stats, not absent).
for queue, per in pairs(tallies) do
  for state, delta in pairs(per) do
    redis.call('HINCRBY', count_key(queue), state, delta)
  end
end

if channel ~= '' then
  local slot = string.format('%d', math.floor(now / slot_ms))
  for queue in pairs(due_queues) do
    local wk = base .. ':w:' .. queue
    if redis.call('GET', wk) ~= slot then
      redis.call('SET', wk, slot, 'PX', WAKE_KEY_TTL_MS)
      redis.call('PUBLISH', channel, queue)
    end
  end
end

return out
