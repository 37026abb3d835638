import asyncio, sys, os, time, uuid
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_ev"
import pg_driver_micro as b
import asyncpg
from shared.sql import query
from shared.ids import new_id
def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
PLAIN = """insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
  max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  values ($1, $2, $3, $4, 'ready', $5::text::jsonb, $6, $7, $8, x_ts($9), x_ts($10), x_ts($10), $11, $12)"""
PLAIN_TS = """insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
  max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  values ($1, $2, $3, $4, 'ready', $5::text::jsonb, $6, $7, $8, now(), now(), now(), $11, $12)"""
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}", server_settings={"plan_cache_mode": "force_generic_plan"}); await b.migrate(c)
    pid = await c.fetchval("select pg_backend_pid()")
    n = 2000
    for sc in ("off", "on"):
        await c.execute(f"set synchronous_commit = {sc}")
        for label, sql in [("enqueue", query("enqueue")), ("plain", PLAIN), ("plain_now", PLAIN_TS)]:
            p0 = proc_cpu(pid); t = time.perf_counter()
            for i in range(n):
                now = int(time.time() * 1000)
                args = [new_id(), new_id(), "noop", "q", '{"seq": 1}', None, new_id(), 3, now, now, None, None]
                if label == "enqueue": args.append(now // 250)
                if label == "plain_now": args[8] = None; args[9] = None
                if label == "plain_now":
                    await c.execute(sql.replace("$9", "$9::bigint").replace("$10", "$10::bigint") if False else sql.replace("now(), now(), now()", "now(), now(), now()"), *args[:8], *args[10:])  if False else await c.execute(PLAIN_TS.replace("$11", "$9").replace("$12", "$10"), *args[:8], *args[10:12])
                else:
                    await c.execute(sql, *args)
            w = time.perf_counter() - t
            print(f"sync={sc} {label}: {n/w:.0f}/s pg {1e6*(proc_cpu(pid)-p0)/n:.0f}us")
    await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
