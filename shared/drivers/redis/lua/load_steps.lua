-- load_steps.lua: the completed steps of a run of one tenant, as name,
-- "<seq>:<started>:<finished>:<output>" pairs (the caller orders them by seq: save order).
--
-- ARGV: run_id, tenant_id (opt: "" for a tenant-less run, "=<tenant>" otherwise)

return redis.call('HGETALL', steps_key(opt(ARGV[2]), ARGV[1]))
