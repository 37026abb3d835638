-- stats.lua: rows per state per queue, the due count and the oldest due run_at.
--
-- ARGV: now, done_ttl_ms
-- Returns one list per queue: queue, due, oldest due run_at (or false), done, then
-- state/count pairs from the queue's tally.
--
-- done is the queue's done zset after forgetting rows finished done_ttl_ms ago (driver clock):
-- the rows Redis has expired, or is about to.

local now = tonumber(ARGV[1])
local ttl = tonumber(ARGV[2])
local out = {}
for _, queue in ipairs(redis.call('SMEMBERS', base .. ':queues')) do
  if ttl > 0 then
    redis.call('ZREMRANGEBYSCORE', done_key(queue), '-inf', now - ttl)
  end
  local due = 0
  local oldest = false
  for band = 0, PRIORITY_BANDS - 1 do
    local key = due_key(queue, band)
    local n = redis.call('ZCOUNT', key, '-inf', now)
    if n > 0 then
      due = due + n
      local head = tonumber(redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')[2])
      if not oldest or head < oldest then
        oldest = head
      end
    end
  end
  local entry = { queue, due, oldest, redis.call('ZCARD', done_key(queue)) }
  local states = redis.call('HGETALL', count_key(queue))
  for i = 1, #states do
    entry[#entry + 1] = states[i]
  end
  out[#out + 1] = entry
end
return out
