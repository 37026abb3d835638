-- load_steps.lua: the completed steps of a run, as name, "<seq>:<started>:<finished>:<output>"
-- pairs (the caller orders them by started_at, then seq).
--
-- ARGV: run_id

return redis.call('HGETALL', steps_key(ARGV[1]))
