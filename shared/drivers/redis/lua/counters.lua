-- counters.lua: the 1-minute counter buckets of one job name from since_ms to now.
--
-- ARGV: job name, since_ms, now
-- Returns one list per bucket that exists: start, then field/value pairs.
-- Buckets live a day (COUNTER_KEEP_MS), so the walk starts no earlier than that.

local name = ARGV[1]
local now = tonumber(ARGV[3])
local since = math.max(tonumber(ARGV[2]), now - COUNTER_KEEP_MS)
local start = since - (since % COUNTER_WIDTH_MS)
local out = {}
while start <= now do
  local fields = redis.call('HGETALL', base .. ':ctr:' .. name .. ':' .. string.format('%d', start))
  if #fields > 0 then
    local entry = { start }
    for i = 1, #fields do
      entry[#entry + 1] = fields[i]
    end
    out[#out + 1] = entry
  end
  start = start + COUNTER_WIDTH_MS
end
return out
