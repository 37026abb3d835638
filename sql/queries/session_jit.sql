-- session_jit: this session's jit setting ('on' or 'off'). The driver asks once per pool: a
-- session with jit on JIT-compiles every hot statement whose generic plan's estimated cost
-- passes jit_above_cost, which a big x_jobs does (tens of milliseconds a claim).
select current_setting('jit') as jit
