-- heartbeat.lua: extend running rows' leases to now + visibility_ms, each fenced on its claim.
--
-- ARGV: 5 per row: id, worker_id, claim, now, visibility_ms
-- Returns one answer per row, in order: 'renewed'; 'cancelled' when the row was cancelled
-- under this very claim; 'lost' when another claim holds the row, it is no longer running,
-- or it is gone. A worker renews every lease it holds on one tick: the driver merges those
-- renewals into one call (redis_batch.py).

local function renew(id, worker, claim, now, visibility)
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
end

local out = {}
for i = 1, #ARGV, 5 do
  out[#out + 1] = renew(ARGV[i], ARGV[i + 1], tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3]),
    tonumber(ARGV[i + 4]))
end
return out
