-- start_ahead.lua: rows claimed ahead start: clear their `ahead` field, each fenced on its
-- claim, so from here a lapsed lease counts their attempt (claim.lua).
--
-- ARGV: 3 per row: id, worker_id, claim
-- Returns one answer per row, in order: 1 when the row is running under that claim (cleared),
-- 0 otherwise (do not run it). The driver merges the starts of one turn into one call
-- (redis_batch.py).

local out = {}
for i = 1, #ARGV, 3 do
  local jk = job_key(ARGV[i])
  local row = redis.call('HMGET', jk, 'state', 'claimed_by', 'claim')
  if owned(row, ARGV[i + 1], tonumber(ARGV[i + 2])) then
    redis.call('HSET', jk, 'ahead', 0)
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
