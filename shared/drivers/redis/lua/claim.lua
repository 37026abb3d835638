-- claim.lua: lease up to `limit` due rows of the queues, by priority then oldest due first;
-- bury final attempts.
--
-- ARGV: now, limit, worker_id, visibility_ms, mark_candidate, ahead_after (-1: none),
--       ahead_returns_max, settlements (1: each burial adds its settlements-outbox entry,
--       code LEASE_LAPSED_FINAL_ATTEMPT), n_drop, <n_drop job names>, <queues...>
-- Returns { claimed, buried, mark }:
--   claimed: one list per row: id, run_id, name, queue, input, tenant_id, idempotency_key,
--            attempt, max_attempts, worker_id, claim, run_at, created_at, lease, traceparent,
--            enqueued_by, ahead (1/0), snoozes, priority
--   buried:  one list per row: id, run_id, name, queue, input, tenant_id, attempt,
--            max_attempts, state
--   mark:    the keyspace mark (prelude.lua's store_mark; `mark_candidate` when there was none),
--            so the driver learns of a wiped keyspace with no round trip of its own
--
-- Candidates per queue: the first `limit` members with run_at <= now of its due zsets, band by
-- band from priority 0 (each zset is ordered by run_at, then insertion; the walk stops at
-- `limit` for the queue, so a lower band is never read once the higher ones filled it), plus
-- running rows whose lease lapsed (at most LAPSED_SCAN per queue per pass). All are sorted by
-- (priority, run_at, seq) and walked as the memory driver walks them: a lapsed row already at its final attempt is buried (dead, or failed
-- when its name is in the drop list, last_error LEASE_LAPSED_FINAL_ATTEMPT, counted) whatever
-- the limit; every other candidate is claimed until `limit` rows are. Cost: O(queues x (limit
-- + lapsed) x log N + queues x 10) however long the backlog is.
--
-- Claim-ahead: the rows claimed after the first `ahead_after` get the `ahead` field (1);
-- start_ahead.lua clears it once the row's body has run a moment. A lapsed row still marked
-- ahead never started: while its `ahead_returns` is under ahead_returns_max it is neither
-- buried nor counted again — handed out with the attempt its last claim counted, its
-- `ahead_returns` one higher (as sql/queries/claim.sql does).

local LAPSED_SCAN = 1000

local now = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local worker = ARGV[3]
local visibility = tonumber(ARGV[4])
local mark = store_mark(ARGV[5])
local ahead_after = tonumber(ARGV[6])
local ahead_returns_max = tonumber(ARGV[7])
local settlements = ARGV[8] == '1'
local n_drop = tonumber(ARGV[9])
local drop = {}
for i = 10, 9 + n_drop do
  drop[ARGV[i]] = true
end

local candidates = {}
for i = 10 + n_drop, #ARGV do
  local queue = ARGV[i]
  local lapsed = redis.call('ZRANGEBYSCORE', running_key(queue), '-inf', now,
    'LIMIT', 0, LAPSED_SCAN)
  for _, id in ipairs(lapsed) do
    local row = redis.call('HMGET', job_key(id), 'run_at', 'seq', 'attempt', 'max_attempts',
      'ahead', 'ahead_returns', 'priority')
    if row[1] then
      local returns = tonumber(row[6]) or 0
      local unused = row[5] == '1' and returns < ahead_returns_max
      candidates[#candidates + 1] = {
        run_at = tonumber(row[1]), seq = tonumber(row[2]), id = id, queue = queue,
        priority = tonumber(row[7]) or 0, lapsed = true, unused = unused, returns = returns,
        final = (not unused) and tonumber(row[3]) >= tonumber(row[4]),
      }
    else
      -- A running member whose row is gone (deleted by hand): drop the stale index entry.
      redis.call('ZREM', running_key(queue), id)
    end
  end
  local wanted = limit
  for band = 0, PRIORITY_BANDS - 1 do
    if wanted <= 0 then
      break
    end
    local due = redis.call('ZRANGEBYSCORE', due_key(queue, band), '-inf', now,
      'WITHSCORES', 'LIMIT', 0, wanted)
    for j = 1, #due, 2 do
      local member = due[j]
      candidates[#candidates + 1] = {
        run_at = tonumber(due[j + 1]), seq = tonumber(string.sub(member, 1, 15)),
        id = string.sub(member, 16), member = member, queue = queue, priority = band,
        lapsed = false, final = false,
      }
    end
    wanted = wanted - #due / 2
  end
end

table.sort(candidates, function(a, b)
  if a.priority ~= b.priority then
    return a.priority < b.priority
  end
  if a.run_at ~= b.run_at then
    return a.run_at < b.run_at
  end
  return a.seq < b.seq
end)

local claimed = {}
local buried = {}
local lease = now + visibility
-- Index moves and tallies are added up here and written once per queue at the end: a claim
-- of 16 rows is two reads and one write per row, plus a few commands per queue.
local tallies = {}
local unqueued = {}    -- due zset key (queue and band) -> due members taken out
local leased = {}      -- queue -> lease, id pairs for the running zset
-- What the reply needs that the claim does not already know (id, queue, worker, run_at
-- and lease it knows), then the row's state (for the tally).
local FIELDS = {
  'run_id', 'name', 'input', 'tenant_id', 'key', 'attempt', 'max_attempts', 'claim',
  'created_at', 'traceparent', 'enqueued_by', 'state', 'snoozes',
}

local function list_of(acc, queue)
  local list = acc[queue]
  if list == nil then
    list = {}
    acc[queue] = list
  end
  return list
end

-- Lease one row: one read, one write; its index moves are queued. Answers its reply row, or
-- nil when the row is gone (a due member whose row was deleted by hand: the entry is dropped).
local function take(jk, c, position)
  local row = redis.call('HMGET', jk, unpack(FIELDS))
  if not c.lapsed then
    local members = list_of(unqueued, due_key(c.queue, c.priority))
    members[#members + 1] = c.member
    if not row[12] then
      return nil
    end
    tally_add(tallies, c.queue, row[12], -1)
    tally_add(tallies, c.queue, 'running', 1)
  end
  local attempt = tonumber(row[6])
  if c.unused then
    redis.call('HSET', jk, 'ahead_returns', c.returns + 1)
  else
    attempt = attempt + 1
  end
  local claim = tonumber(row[8]) + 1
  local ahead = 0
  if ahead_after >= 0 and position > ahead_after then
    ahead = 1
  end
  redis.call('HSET', jk, 'state', 'running', 'attempt', attempt, 'claim', claim,
    'claimed_by', worker, 'lease', lease, 'updated_at', now, 'ahead', ahead)
  local running = list_of(leased, c.queue)
  running[#running + 1] = lease
  running[#running + 1] = c.id
  return {
    c.id, row[1], row[2], c.queue, row[3], row[4], row[5], attempt, tonumber(row[7]), worker,
    claim, c.run_at, tonumber(row[9]), lease, row[10], row[11], ahead, tonumber(row[13]) or 0,
    c.priority,
  }
end

for _, c in ipairs(candidates) do
  local jk = job_key(c.id)
  if c.final then
    local row = redis.call('HMGET', jk, 'name', 'lk', 'run_id', 'input', 'tenant_id',
      'attempt', 'max_attempts')
    local target = 'dead'
    if drop[row[1]] then
      target = 'failed'
    end
    finish(c.id, c.queue, row[2], target, now)
    redis.call('HSET', jk, 'last_error', 'LEASE_LAPSED_FINAL_ATTEMPT')
    bump(row[1], target, now, nil)
    if settlements then
      settled_out(c.id, row[3], row[1], row[5], target, 'LEASE_LAPSED_FINAL_ATTEMPT', row[6], now)
    end
    buried[#buried + 1] = {
      c.id, row[3], row[1], c.queue, row[4], row[5], tonumber(row[6]), tonumber(row[7]), target,
    }
  elseif #claimed < limit then
    local row = take(jk, c, #claimed + 1)
    if row then
      claimed[#claimed + 1] = row
    end
  end
end

for key, members in pairs(unqueued) do
  call_chunked('ZREM', key, members)
end
for queue, pairs_ in pairs(leased) do
  call_chunked('ZADD', running_key(queue), pairs_)
end
tally_flush(tallies)

return { claimed, buried, mark }
