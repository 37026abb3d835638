-- ack.lua: settle running rows `done`, each fenced on its claim; the counters move here too.
--
-- ARGV: done_ttl_ms, settlements (1: each landed ack adds its settlements-outbox entry,
--       'completed'), then 6 per row: id, worker_id, claim, now, duration_ms (opt),
--       result (opt: the body's return value as JSON text, stored verbatim in the row's
--       `result` field; absent: no result)
-- Returns one answer per row, in order: 1 when it landed, 0 when the row is not running
-- under {worker_id, claim}. One ack is one row; the driver merges the acks issued in one turn
-- of its event loop into one call (redis_batch.py), each row settled as a call of its own.
--
-- With done_ttl_ms > 0 the row and its steps expire that long after the ack (PEXPIRE: Redis
-- drops them, no sweep), and the queue's done zset forgets rows finished that long ago by the
-- driver's clock, so stats() counts the done rows still kept.
--
-- A row enqueued with unique_for (its 'uf') leaves its key's marker {p}:u:<live key> (its
-- ids and finished_at) for that long: enqueue.lua answers it within the period. The marker
-- expires with the period (PEXPIRE), so nothing sweeps it; enqueue.lua compares finished_at
-- with its own clock, so a clock moved ahead sees the period end before Redis drops it.
-- Such a row and its steps are kept for the longer of done_ttl_ms and the period, as the
-- retention sweep keeps them on Postgres: the run an enqueue is answered with inside the period
-- is still there to read. The done zset still forgets it after done_ttl_ms (stats()).

local ttl = tonumber(ARGV[1])
local settlements = ARGV[2] == '1'
local live = base .. ':live'
-- Per row: one read and the row's own writes. The running / done index moves, the tallies
-- and the counters are added up and written once per queue (per bucket) at the end.
local tallies = {}
local counters = {}
local unleased = {}    -- queue -> ids out of the running zset
local finished = {}    -- queue -> finished_at, id pairs for the done zset
local latest = {}      -- queue -> the latest now of its rows (the done zset's horizon)

local function list_of(acc, queue)
  local list = acc[queue]
  if list == nil then
    list = {}
    acc[queue] = list
  end
  return list
end

local released = {}    -- live key, id pairs: a live key is released when it still names its row

local function ack(id, worker, claim, now, duration, result)
  local jk = job_key(id)
  local row = redis.call('HMGET', jk, 'state', 'claimed_by', 'claim', 'queue', 'name', 'lk',
    'run_id', 'tenant_id', 'uf', 'rw', 'attempt')
  if not owned(row, worker, claim) then
    return 0
  end
  local queue = row[4]
  if result ~= nil then
    redis.call('HSET', jk, 'state', 'done', 'finished_at', now, 'updated_at', now, 'result',
      result)
    redis.call('HDEL', jk, 'lease')
  else
    redis.call('HSET', jk, 'state', 'done', 'finished_at', now, 'updated_at', now)
    redis.call('HDEL', jk, 'lease', 'result')
  end
  -- A row a result wait marked (`rw`, prelude.lua's announce_settled) announces its id.
  if row[10] then
    redis.call('PUBLISH', base .. ':results', id)
  end
  released[#released + 1] = row[6]
  released[#released + 1] = id
  if row[9] then
    local marker = base .. ':u:' .. row[6]
    redis.call('HSET', marker, 'id', id, 'run_id', row[7], 'finished_at', now)
    redis.call('PEXPIRE', marker, row[9])
  end
  if ttl > 0 then
    local keep = ttl
    if row[9] and tonumber(row[9]) > keep then
      keep = tonumber(row[9])
    end
    redis.call('PEXPIRE', jk, keep)
    redis.call('PEXPIRE', steps_key(row[8], row[7]), keep)
  end
  local ids = list_of(unleased, queue)
  ids[#ids + 1] = id
  local done = list_of(finished, queue)
  done[#done + 1] = now
  done[#done + 1] = id
  if latest[queue] == nil or now > latest[queue] then
    latest[queue] = now
  end
  tally_add(tallies, queue, 'running', -1)
  bump_add(counters, row[5], 'done', now, duration)
  if settlements then
    settled_out(id, row[7], row[5], row[8], 'completed', nil, row[11], now)
  end
  return 1
end

local out = {}
for i = 3, #ARGV, 6 do
  out[#out + 1] = ack(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    tonumber(opt(ARGV[i + 4])), opt(ARGV[i + 5]))
end

-- The live keys, read and released once for every row that landed (a row's key is released
-- only while it still names that row, as finish() in prelude.lua does).
for i = 1, #released, CHUNK do
  local chunk = {}
  for j = i, math.min(i + CHUNK - 1, #released), 2 do
    chunk[#chunk + 1] = released[j]
  end
  local holders = redis.call('HMGET', live, unpack(chunk))
  local gone = {}
  for k, holder in ipairs(holders) do
    if holder == released[i + 2 * (k - 1) + 1] then
      gone[#gone + 1] = chunk[k]
    end
  end
  call_chunked('HDEL', live, gone)
end
for queue, ids in pairs(unleased) do
  call_chunked('ZREM', running_key(queue), ids)
end
for queue, done in pairs(finished) do
  call_chunked('ZADD', done_key(queue), done)
  if ttl > 0 then
    redis.call('ZREMRANGEBYSCORE', done_key(queue), '-inf', latest[queue] - ttl)
  end
end
tally_flush(tallies)
bump_flush(counters)
return out
