import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_ev2"
import pg_driver_micro as b
import asyncpg
from shared.sql import query
from shared.ids import new_id
def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
COLS = """insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
  max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  values ($1::text, $2::text, $3::text, $4::text, case when $9::bigint > $10::bigint then 'delayed' else 'ready' end, $5::text::jsonb, $6::text, $7::text, $8::int, x_ts($9::bigint), x_ts($10::bigint), x_ts($10::bigint), $11::text, $12::text)"""
ENQ = query("enqueue")
NOWAKE = ENQ.split("woke as (")[0].rstrip().rstrip(",") + "\nselect i.id, i.run_id, false as deduped, 0 as woke from inserted i union all select f.id, f.run_id, true, 0 from found f"
VARIANTS = {
  "enqueue": (ENQ, True),
  "plain": (COLS, False),
  "plain_oc_ret": (COLS + " on conflict do nothing returning id, run_id", False),
  "no_wake": (NOWAKE, False),
}
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}", server_settings={"plan_cache_mode": "force_generic_plan", "synchronous_commit": os.environ.get("SC", "off")}); await b.migrate(c)
    pid = await c.fetchval("select pg_backend_pid()")
    n = 1500
    res = {k: [] for k in VARIANTS}
    for rnd in range(3):
        for label, (sql, slot) in VARIANTS.items():
            p0 = proc_cpu(pid); t = time.perf_counter()
            for i in range(n):
                now = int(time.time() * 1000)
                args = [new_id(), new_id(), "noop", "q", '{"seq": 1}', None, new_id(), 3, now, now, None, None]
                if slot: args.append(now // 250)
                await c.fetch(sql, *args)
            w = time.perf_counter() - t
            res[label].append((round(n/w), round(1e6*(proc_cpu(pid)-p0)/n)))
    for k, v in res.items(): print(k, v)
    await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
