-- prelude.lua: helpers every Redis driver script starts with (the loader prepends this file).
--
-- Key layout (KEYS[1] is the deployment's hash tag, e.g. "{ujobs}"; every key below starts
-- with it, so one deployment lives in one Redis Cluster slot):
--   {p}:job:<id>          hash    one job row (fields: see enqueue.lua)
--   {p}:live              hash    live key (JSON [name, tenant or "", key]) -> id of the live row
--   {p}:seq               string  insertion counter: FIFO among rows due at the same ms
--   {p}:queues            set     every queue that ever held a row (what stats() walks)
--   {p}:q:<queue>         zset    ready / delayed / suspended rows of priority 0, score run_at,
--                                 member <seq, 15 digits><id> so equal run_at pops FIFO
--   {p}:q<n>:<queue>      zset    the same for priority n, 1..9 (field `priority` of the row;
--                                 absent: 0); a claim takes from the lowest band with due work
--   {p}:qt:<n>:<queue>:<band>:<tenant>
--                         zset    the rows of one band of one tenant ('' for the jobs without
--                                 one), same scores and members: what the fair claim takes
--                                 from (<n>, the queue's length in bytes, keeps the split
--                                 unambiguous)
--   {p}:qs:<queue>:<band> zset    the tenants with a {p}:qt zset in that band of the queue, all
--                                 scored 0 so ZRANGEBYLEX walks them in byte order
--   {p}:qc:<queue>        string  the fair cursor: the tenant the last claim served last
--   {p}:tw                hash    tenant -> weight (1..1000; absent: 1), read by every claim
--   {p}:r:<queue>         zset    running rows, score lease expiry, member id
--   {p}:d:<queue>         zset    done rows, score finished_at (driver clock), member id
--   {p}:n:<queue>         hash    rows per state (done excluded: counted off {p}:d:<queue>)
--   {p}:steps:<run_id>    hash    a tenant-less run's steps: step name ->
--                                 "<seq>:<started>:<finished>:<output JSON>"
--   {p}:tsteps:<n>:<tenant>:<run_id>
--                         hash    a tenant's run's steps, as above (a run_id is a namespace of
--                                 its tenant; <n>, the tenant's length in bytes, keeps the split
--                                 unambiguous whatever the tenant or the run_id holds)
--   {p}:ctr:<job>:<start> hash    one 1-minute counter bucket: done/retried/failed/dead/duration_ms
--   {p}:w:<queue>         string  the wake slot this queue was last announced in (enqueue.lua)
--   {p}:store             string  the keyspace mark: a random token written by the first claim
--                                 (or mark.lua) that found none; a process that saw another
--                                 token, or none, knows the keyspace was wiped under it
--   {p}:settled           stream  the settlements outbox (the driver's settlements on): one
--                                 entry per ending of a run, added by the script that ended it
--                                 (settled_out); the api's relay publishes it to JetStream
--                                 and XDELs what the stream acked
--   {p}:results           channel the ids of finished rows a result wait marked (field `rw`,
--                                 result_watch.lua): PUBLISHed by the script that finished
--                                 them (announce_settled), heard by the waiting process
--
-- Time is never Redis TIME: every script is handed the driver clock's `now` as an argument.
-- Inputs and step outputs are JSON strings stored verbatim; no script decodes them (cjson
-- would round large integers).

local base = KEYS[1]

local COUNTER_WIDTH_MS = 60000        -- COUNTER_TIERS[0][0] in shared/drivers/base.py
local COUNTER_KEEP_MS = 86400000      -- COUNTER_TIERS[0][1]: a 1-minute bucket lives a day

local function job_key(id)
  return base .. ':job:' .. id
end

-- The due zset of one priority band: band 0 (every job's default) keeps the key it always
-- had, so a keyspace written before priorities existed is read as it was.
local PRIORITY_BANDS = 10

local function due_key(queue, priority)
  if priority == nil or priority == 0 then
    return base .. ':q:' .. queue
  end
  return base .. ':q' .. string.format('%d', priority) .. ':' .. queue
end

local function tenant_due_key(queue, band, tenant)
  return base .. ':qt:' .. string.format('%d', #queue) .. ':' .. queue .. ':'
    .. string.format('%d', band) .. ':' .. tenant
end

local function tenants_key(queue, band)
  return base .. ':qs:' .. queue .. ':' .. string.format('%d', band)
end

local function cursor_key(queue)
  return base .. ':qc:' .. queue
end

-- A row becomes claimable (or moves its run_at): in its band's zset, its tenant's zset of
-- that band, and its tenant in the band's tenant set. `tenant` false or nil: the group without
-- a tenant; `band` nil or false: 0.
local function due_add(queue, band, tenant, run_at, member)
  local group = tenant or ''
  local b = tonumber(band) or 0
  redis.call('ZADD', due_key(queue, b), run_at, member)
  redis.call('ZADD', tenant_due_key(queue, b, group), run_at, member)
  redis.call('ZADD', tenants_key(queue, b), 0, group)
end

local function running_key(queue)
  return base .. ':r:' .. queue
end

local function done_key(queue)
  return base .. ':d:' .. queue
end

local function count_key(queue)
  return base .. ':n:' .. queue
end

-- A run's steps hash (see the layout above). `tenant` is the row's tenant_id field: false
-- (absent) or '' is the tenant-less jobs' own namespace.
local function steps_key(tenant, run_id)
  if not tenant or tenant == '' then
    return base .. ':steps:' .. run_id
  end
  return base .. ':tsteps:' .. string.format('%d', #tenant) .. ':' .. tenant .. ':' .. run_id
end

-- The keyspace mark (see the layout above): the token there, or `candidate` written when none.
local function store_mark(candidate)
  local key = base .. ':store'
  local mark = redis.call('GET', key)
  if not mark then
    redis.call('SET', key, candidate)
    return candidate
  end
  return mark
end

-- Optional strings travel as "" (absent) or "=<value>" (present, possibly empty).
local function opt(value)
  if value == nil or value == '' then
    return nil
  end
  return string.sub(value, 2)
end

-- Move one row between states in its queue's per-state tally (done is tallied by its zset).
local function tally(queue, from, to)
  local key = count_key(queue)
  if from ~= nil and from ~= 'done' then
    redis.call('HINCRBY', key, from, -1)
  end
  if to ~= nil and to ~= 'done' then
    redis.call('HINCRBY', key, to, 1)
  end
end

-- A script that moves many rows adds their tallies up in a table (tally_add) and writes
-- each (queue, state) once at the end (tally_flush): one HINCRBY per queue and state, not
-- two per row. Redis replicates a script's effects, so the walk order of pairs() is free.
local function tally_add(acc, queue, state, delta)
  if state == nil or state == 'done' then
    return
  end
  local per = acc[queue]
  if per == nil then
    per = {}
    acc[queue] = per
  end
  per[state] = (per[state] or 0) + delta
end

local function tally_flush(acc)
  for queue, per in pairs(acc) do
    for state, delta in pairs(per) do
      if delta ~= 0 then
        redis.call('HINCRBY', count_key(queue), state, delta)
      end
    end
  end
end

-- Counters the same way: added up per 1-minute bucket (bump_add), each bucket written once
-- (bump_flush). duration_ms adds up for done only, so duration_ms / done is the mean
-- successful run. The settle's own script moves them, never a second trip.
local function bump_add(acc, name, kind, now, duration)
  local start = now - (now % COUNTER_WIDTH_MS)
  local key = base .. ':ctr:' .. name .. ':' .. string.format('%d', start)
  local fields = acc[key]
  if fields == nil then
    fields = {}
    acc[key] = fields
  end
  fields[kind] = (fields[kind] or 0) + 1
  if kind == 'done' and duration ~= nil then
    fields.duration_ms = (fields.duration_ms or 0) + duration
  end
end

local function bump_flush(acc)
  for key, fields in pairs(acc) do
    for field, n in pairs(fields) do
      redis.call('HINCRBY', key, field, n)
    end
    redis.call('PEXPIRE', key, COUNTER_KEEP_MS)
  end
end

-- One settle's counter, written at once.
local function bump(name, kind, now, duration)
  local acc = {}
  bump_add(acc, name, kind, now, duration)
  bump_flush(acc)
end

-- One command over a long list of arguments, in chunks (Lua's unpack has a stack limit;
-- CHUNK is even, so score/member pairs never split).
local CHUNK = 1000

local function call_chunked(command, key, items)
  for i = 1, #items, CHUNK do
    redis.call(command, key, unpack(items, i, math.min(i + CHUNK - 1, #items)))
  end
end

-- The settlements outbox (see the layout above): one entry per ending, in the ending's own
-- script, so it exists exactly when the row moved. Fields id, run_id, name, outcome, attempt,
-- settled_at; tenant and code only when the row has one.
local function settled_out(id, run_id, name, tenant, outcome, code, attempt, now)
  local fields = { 'id', id, 'run_id', run_id, 'name', name, 'outcome', outcome,
    'attempt', attempt, 'settled_at', now }
  if tenant then
    fields[#fields + 1] = 'tenant'
    fields[#fields + 1] = tenant
  end
  if code then
    fields[#fields + 1] = 'code'
    fields[#fields + 1] = code
  end
  redis.call('XADD', base .. ':settled', '*', unpack(fields))
end

-- A running row is ours when the fence {worker_id, claim} matches and it is still running.
local function owned(row, worker, claim)
  return row[1] == 'running' and row[2] == worker and tonumber(row[3]) == claim
end

-- Finish a running row: out of the running zset, its live key released, its state tallied.
-- A row a result wait marked (`rw`) announces its id when it finishes; rows nobody waits for
-- publish nothing.
local function announce_settled(jk, id)
  if redis.call('HEXISTS', jk, 'rw') == 1 then
    redis.call('PUBLISH', base .. ':results', id)
  end
end

local function finish(id, queue, lk, target, now)
  local jk = job_key(id)
  announce_settled(jk, id)
  redis.call('HSET', jk, 'state', target, 'finished_at', now, 'updated_at', now)
  redis.call('HDEL', jk, 'lease')
  redis.call('ZREM', running_key(queue), id)
  local live = base .. ':live'
  if redis.call('HGET', live, lk) == id then
    redis.call('HDEL', live, lk)
  end
  tally(queue, 'running', target)
end
