-- ack.lua: settle a running row `done`, fenced on the claim; the counter moves here too.
--
-- ARGV: id, worker_id, claim, now, duration_ms (opt), done_ttl_ms
-- Returns 1 when it landed, 0 when the row is not running under {worker_id, claim}.
--
-- With done_ttl_ms > 0 the row and its steps expire that long after the ack (PEXPIRE: Redis
-- drops them, no sweep), and the queue's done zset forgets rows finished that long ago by the
-- driver's clock, so stats() counts the done rows still kept.

local id = ARGV[1]
local worker = ARGV[2]
local claim = tonumber(ARGV[3])
local now = tonumber(ARGV[4])
local duration = tonumber(opt(ARGV[5]))
local ttl = tonumber(ARGV[6])

local jk = job_key(id)
local row = redis.call('HMGET', jk, 'state', 'claimed_by', 'claim', 'queue', 'name', 'lk',
  'run_id')
if not owned(row, worker, claim) then
  return 0
end
local queue = row[4]
finish(id, queue, row[6], 'done', now)
bump(row[5], 'done', now, duration)
redis.call('ZADD', done_key(queue), now, id)
if ttl > 0 then
  redis.call('ZREMRANGEBYSCORE', done_key(queue), '-inf', now - ttl)
  redis.call('PEXPIRE', jk, ttl)
  redis.call('PEXPIRE', steps_key(row[7]), ttl)
end
return 1
