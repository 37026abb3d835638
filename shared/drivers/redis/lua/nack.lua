-- nack.lua: settle a running row per nack_state(), fenced on the claim.
--
-- ARGV: id, worker_id, claim, now, target (dead|failed|suspended|ready), count (0|1),
--       error (opt), run_at (opt), counter kind (opt), duration_ms (opt),
--       unreachable cap (opt), settlements (1: an ending nack, one with a counter kind,
--       adds its settlements-outbox entry: outcome the counter kind, code the error's X_ code),
--       snooze (1: a snooze, adds one to the row's snoozes)
-- Returns 1 when it landed, 0 when the row is not running under {worker_id, claim}, or when
-- an outage hand-back (unreachable cap given) finds the row already handed back that many
-- times (its field unreachable_returns; the nack then changes nothing).
--
-- count = 0 hands the attempt back (the same number is presented again). dead and failed
-- finish the row (kept, never expired); ready and suspended put it back in its queue's due
-- zset at run_at (default now). The counter the caller named (nack_counter) moves here.

local id = ARGV[1]
local worker = ARGV[2]
local claim = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local target = ARGV[5]
local count = ARGV[6] == '1'
local err = opt(ARGV[7])
local run_at = tonumber(opt(ARGV[8])) or now
local counter = opt(ARGV[9])
local duration = tonumber(opt(ARGV[10]))
local cap = tonumber(opt(ARGV[11]))
local settlements = ARGV[12] == '1'
local snooze = ARGV[13] == '1'

local jk = job_key(id)
local row = redis.call('HMGET', jk, 'state', 'claimed_by', 'claim', 'queue', 'name', 'lk',
  'attempt', 'm', 'priority', 'tenant_id')
if not owned(row, worker, claim) then
  return 0
end
if cap ~= nil then
  local returns = tonumber(redis.call('HGET', jk, 'unreachable_returns')) or 0
  if returns >= cap then
    return 0
  end
  redis.call('HSET', jk, 'unreachable_returns', returns + 1)
end
local queue = row[4]
local attempt = tonumber(row[7])
if not count and attempt > 0 then
  attempt = attempt - 1
  redis.call('HSET', jk, 'attempt', attempt)
end
if err ~= nil then
  redis.call('HSET', jk, 'last_error', err)
end
if snooze then
  redis.call('HINCRBY', jk, 'snoozes', 1)
end
if target == 'dead' or target == 'failed' then
  finish(id, queue, row[6], target, now)
else
  redis.call('HSET', jk, 'state', target, 'run_at', run_at, 'updated_at', now)
  redis.call('HDEL', jk, 'lease')
  redis.call('ZREM', running_key(queue), id)
  due_add(queue, row[9], row[10], run_at, row[8])
  tally(queue, 'running', target)
end
if counter ~= nil then
  bump(row[5], counter, now, duration)
  if settlements then
    local more = redis.call('HMGET', jk, 'run_id', 'tenant_id')
    local code = nil
    if err ~= nil then
      code = string.match(err, '^(X_[A-Z0-9_]+)')
    end
    settled_out(id, more[1], row[5], more[2], counter, code, attempt, now)
  end
end
return 1
