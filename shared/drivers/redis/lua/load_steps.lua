-- load_steps.lua: the completed steps of a run, as name, "<seq>:<started>:<finished>:<output>"
-- pairs (the caller orders them by seq: save order).
--
-- ARGV: run_id

return redis.call('HGETALL', steps_key(ARGV[1]))
