-- heartbeat.lua: extend a running row's lease to now + visibility_ms, fenced on the claim.
--
-- ARGV: id, worker_id, claim, now, visibility_ms
-- Returns 'renewed'; 'cancelled' when the row was cancelled under this very claim; 'lost'
-- when another claim holds the row, it is no longer running, or it is gone.

local id = ARGV[1]
local worker = ARGV[2]
local claim = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local visibility = tonumber(ARGV[5])

local jk = job_key(id)
local row = redis.call('HMGET', jk, 'state', 'claimed_by', 'claim', 'queue')
if not row[1] then
  return 'lost'
end
if row[1] == 'cancelled' and row[2] == worker and tonumber(row[3]) == claim then
  return 'cancelled'
end
if not owned(row, worker, claim) then
  return 'lost'
end
local lease = now + visibility
redis.call('HSET', jk, 'lease', lease, 'updated_at', now)
redis.call('ZADD', running_key(row[4]), lease, id)
return 'renewed'
