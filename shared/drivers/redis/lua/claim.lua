-- claim.lua: lease up to `limit` due rows of the queues, by priority then oldest due first;
-- bury final attempts.
--
-- ARGV: now, limit, worker_id, visibility_ms, mark_candidate, ahead_after (-1: none),
--       ahead_returns_max, settlements (1: each burial adds its settlements-outbox entry,
--       code LEASE_LAPSED_FINAL_ATTEMPT), n_drop, <n_drop job names>, n_strict,
--       <n_strict strict queue names>, <queues...>
-- Returns { claimed, buried, mark }:
--   claimed: one list per row: id, run_id, name, queue, input, tenant_id, idempotency_key,
--            attempt, max_attempts, worker_id, claim, run_at, created_at, lease, traceparent,
--            enqueued_by, ahead (1/0), snoozes, priority
--   buried:  one list per row: id, run_id, name, queue, input, tenant_id, attempt,
--            max_attempts, state
--   mark:    the keyspace mark (prelude.lua's store_mark; `mark_candidate` when there was none),
--            so the driver learns of a wiped keyspace with no round trip of its own
--
-- Candidates per queue: running rows whose lease lapsed (at most LAPSED_SCAN per queue per
-- pass). Then priority first, fair inside a band: in a
-- queue that is not strict, its top band (the lowest priority with a due member, one probe
-- per band from 0) is tenant-fair (ujobs.drivers.fairness): the tenants after the cursor
-- {p}:qc:<queue> in the band's tenant set {p}:qs:<queue>:<band> (ZRANGEBYLEX, wrapping round
-- to the cursor, at most `limit`), each giving its oldest min(limit, weight x rounds) due
-- members of {p}:qt:<n>:<queue>:<band>:<tenant>, weights from {p}:tw, ranked by (round,
-- place in the walk, queue, index). Then the fill: the first members with run_at <= now of
-- the queue's due zsets, band by band from priority 0 (the walk stops once it has `limit`
-- beyond the fair rows), that are not fair rows. Rows are handed out by priority, and within
-- one: lapsed rows, fair rows (by their rank), the fill ((run_at, seq) for both others).
-- They are walked in that
-- order: a lapsed row already at its final attempt is buried (dead, or failed when its name
-- is in the drop list, last_error LEASE_LAPSED_FINAL_ATTEMPT, counted) whatever the limit;
-- every other candidate is claimed until `limit` rows are. A claimed due row leaves its band's
-- zset and its tenant's (its tenant leaves the band's set with its last row), and the cursor
-- moves to the tenant of the last fair row claimed. Cost: O(queues x (limit + lapsed) x log N
-- + queues x 10) however long the backlog and however many tenants.
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
local n_strict = tonumber(ARGV[10 + n_drop])
local strict = {}
for i = 11 + n_drop, 10 + n_drop + n_strict do
  strict[ARGV[i]] = true
end

local function due_candidate(member, score, queue, band, tenant)
  return {
    run_at = tonumber(score), seq = tonumber(string.sub(member, 1, 15)),
    id = string.sub(member, 16), member = member, queue = queue, priority = band,
    tenant = tenant, lapsed = false, final = false,
  }
end

-- The tenants a fair claim visits in one band of `queue` (ujobs.drivers.fairness.walk): those
-- after the cursor in byte order, then wrapping round to it; at most `limit`, one ZRANGEBYLEX
-- each way.
local function walk(queue, band)
  local key = tenants_key(queue, band)
  local cursor = redis.call('GET', cursor_key(queue))
  if not cursor then
    return redis.call('ZRANGEBYLEX', key, '-', '+', 'LIMIT', 0, limit)
  end
  local walked = redis.call('ZRANGEBYLEX', key, '(' .. cursor, '+', 'LIMIT', 0, limit)
  if #walked < limit then
    local behind = redis.call('ZRANGEBYLEX', key, '-', '[' .. cursor, 'LIMIT', 0,
      limit - #walked)
    for _, tenant in ipairs(behind) do
      walked[#walked + 1] = tenant
    end
  end
  return walked
end

local lapsed_rows = {}
local ready = {}
for i = 11 + n_drop + n_strict, #ARGV do
  local queue = ARGV[i]
  local lapsed = redis.call('ZRANGEBYSCORE', running_key(queue), '-inf', now,
    'LIMIT', 0, LAPSED_SCAN)
  for _, id in ipairs(lapsed) do
    local row = redis.call('HMGET', job_key(id), 'run_at', 'seq', 'attempt', 'max_attempts',
      'ahead', 'ahead_returns', 'priority')
    if row[1] then
      local returns = tonumber(row[6]) or 0
      local unused = row[5] == '1' and returns < ahead_returns_max
      lapsed_rows[#lapsed_rows + 1] = {
        run_at = tonumber(row[1]), seq = tonumber(row[2]), id = id, queue = queue,
        priority = tonumber(row[7]) or 0, lapsed = true, unused = unused, returns = returns,
        final = (not unused) and tonumber(row[3]) >= tonumber(row[4]),
      }
    else
      -- A running member whose row is gone (deleted by hand): drop the stale index entry.
      redis.call('ZREM', running_key(queue), id)
    end
  end
  -- Fair (not strict): the top band's walked tenants, each its oldest min(limit, weight x
  -- rounds) due rows; a tenant set member whose zset is gone is dropped on the way.
  local fair_ids = {}
  local n_fair = 0
  local band = nil
  if not strict[queue] then
    for b = 0, PRIORITY_BANDS - 1 do
      if #redis.call('ZRANGEBYSCORE', due_key(queue, b), '-inf', now, 'LIMIT', 0, 1) > 0 then
        band = b
        break
      end
    end
  end
  if band ~= nil then
    local walked = walk(queue, band)
    local weights = {}
    local total = 0
    if #walked > 0 then
      weights = redis.call('HMGET', base .. ':tw', unpack(walked))
    end
    for k = 1, #walked do
      local w = tonumber(weights[k]) or 1
      if walked[k] == '' then
        w = 1
      end
      weights[k] = w
      total = total + w
    end
    local rounds = 0
    if total > 0 then
      rounds = math.ceil(limit / total)
    end
    for place, tenant in ipairs(walked) do
      local w = weights[place]
      local key = tenant_due_key(queue, band, tenant)
      local rows = redis.call('ZRANGEBYSCORE', key, '-inf', now, 'WITHSCORES', 'LIMIT', 0,
        math.min(limit, w * rounds))
      if #rows == 0 and redis.call('EXISTS', key) == 0 then
        redis.call('ZREM', tenants_key(queue, band), tenant)
      end
      for j = 1, #rows, 2 do
        local c = due_candidate(rows[j], rows[j + 1], queue, band, tenant)
        local index = (j + 1) / 2
        c.round = math.ceil(index / w)
        c.place = place
        c.index = index
        c.fair = true
        ready[#ready + 1] = c
        fair_ids[c.id] = true
        n_fair = n_fair + 1
      end
    end
  end
  -- The fill: band by band, the oldest due members that are not fair rows.
  local wanted = limit + n_fair
  for b = 0, PRIORITY_BANDS - 1 do
    if wanted <= 0 then
      break
    end
    local due = redis.call('ZRANGEBYSCORE', due_key(queue, b), '-inf', now,
      'WITHSCORES', 'LIMIT', 0, wanted)
    for j = 1, #due, 2 do
      local c = due_candidate(due[j], due[j + 1], queue, b, nil)
      if not fair_ids[c.id] then
        ready[#ready + 1] = c
      end
    end
    wanted = wanted - #due / 2
  end
end

-- By priority; within one: lapsed rows (run_at, seq), the fair rows by their rank, the fill
-- (run_at, seq) (fairness.claim_order).
local function part(c)
  if c.lapsed then
    return 0
  elseif c.fair then
    return 1
  end
  return 2
end

local candidates = lapsed_rows
for _, c in ipairs(ready) do
  candidates[#candidates + 1] = c
end
table.sort(candidates, function(a, b)
  if a.priority ~= b.priority then
    return a.priority < b.priority
  end
  local pa, pb = part(a), part(b)
  if pa ~= pb then
    return pa < pb
  end
  if pa == 1 then
    if a.round ~= b.round then
      return a.round < b.round
    end
    if a.place ~= b.place then
      return a.place < b.place
    end
    if a.queue ~= b.queue then
      return a.queue < b.queue
    end
    return a.index < b.index
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
local untenanted = {}  -- tenant zset key -> { queue, band, tenant, members taken out }
local moved = {}       -- queue -> the tenant of its last fair row handed out (the cursor)
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
    local tenant = c.tenant or row[4] or ''
    local key = tenant_due_key(c.queue, c.priority, tenant)
    local taken = untenanted[key]
    if taken == nil then
      taken = { queue = c.queue, band = c.priority, tenant = tenant, members = {} }
      untenanted[key] = taken
    end
    taken.members[#taken.members + 1] = c.member
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
      if c.fair then
        moved[c.queue] = c.tenant
      end
    end
  end
end

for key, members in pairs(unqueued) do
  call_chunked('ZREM', key, members)
end
for key, taken in pairs(untenanted) do
  call_chunked('ZREM', key, taken.members)
  if redis.call('EXISTS', key) == 0 then
    redis.call('ZREM', tenants_key(taken.queue, taken.band), taken.tenant)
  end
end
for queue, tenant in pairs(moved) do
  redis.call('SET', cursor_key(queue), tenant)
end
for queue, pairs_ in pairs(leased) do
  call_chunked('ZADD', running_key(queue), pairs_)
end
tally_flush(tallies)

return { claimed, buried, mark }
