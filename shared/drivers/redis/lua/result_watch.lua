-- result_watch.lua: a result wait reads the row and, while it is live, marks it (`rw`), so
-- the script that finishes it announces its id on {p}:results (announce_settled). The mark and
-- the read are one script: no finish can land between them unseen.
--
-- ARGV: id, mark (1: mark a live row; 0: only read)
-- Returns the row's fields as HGETALL does (empty when there is no such row).

local jk = job_key(ARGV[1])
if ARGV[2] == '1' then
  local state = redis.call('HGET', jk, 'state')
  if state == 'ready' or state == 'delayed' or state == 'running' or state == 'suspended' then
    redis.call('HSET', jk, 'rw', 1)
  end
end
return redis.call('HGETALL', jk)
