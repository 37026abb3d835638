-- save_step.lua: persist one completed step, refused unless the row is ours and running.
--
-- ARGV: id, worker_id, claim, run_id, step name, output JSON, started_at, now
-- Returns 1 when stored (or already stored: the first output of a name wins), 0 when refused.
-- The step goes to the run of the ROW's tenant (read with the fence): a run_id is a namespace
-- of its tenant.
--
-- The run's steps hash is made persistent again: a done row sharing this run_id may have set
-- it to expire, and a live run's steps must outlive that.

local id = ARGV[1]
local worker = ARGV[2]
local claim = tonumber(ARGV[3])
local run_id = ARGV[4]
local name = ARGV[5]
local output = ARGV[6]
local started = ARGV[7]
local now = ARGV[8]

local row = redis.call('HMGET', job_key(id), 'state', 'claimed_by', 'claim', 'run_id',
  'tenant_id')
if not owned(row, worker, claim) or row[4] ~= run_id then
  return 0
end
local sk = steps_key(row[5], run_id)
if redis.call('HEXISTS', sk, name) == 0 then
  local seq = redis.call('INCR', base .. ':seq')
  redis.call('HSET', sk, name, string.format('%d', seq) .. ':' .. started .. ':' .. now .. ':' .. output)
end
redis.call('PERSIST', sk)
return 1
