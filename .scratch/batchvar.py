import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_bv"
import pg_driver_micro as b
import asyncpg, orjson
from shared.sql import query
from shared.ids import new_id
def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
SRC = """from rows from (jsonb_to_recordset($1::text::jsonb)
                    as (id text, run_id text, name text, queue text, input jsonb,
                        tenant_id text, idempotency_key text, max_attempts int,
                        run_at_ms bigint, traceparent text, enqueued_by text)) r"""
INS = """insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                      max_attempts, run_at, created_at, updated_at, traceparent, enqueued_by)
  select r.id, r.run_id, r.name, r.queue, 'ready', r.input, r.tenant_id, r.idempotency_key, r.max_attempts,
         x_ts(r.run_at_ms), x_ts($2::bigint), x_ts($2::bigint), r.traceparent, r.enqueued_by """ + SRC
V = {
 "enqueue_many": query("enqueue_many"),
 "plain": INS + " and $3::bigint is not null and $4::bigint is not null" if False else INS.replace("from rows", "from rows") ,
 "oc_ret": INS + " on conflict do nothing returning id, run_id",
}
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}", server_settings={"plan_cache_mode": "force_generic_plan"}); await b.migrate(c)
    pid = await c.fetchval("select pg_backend_pid()")
    res = {k: [] for k in V}
    for rnd in range(3):
        for label, sql in V.items():
            p0 = proc_cpu(pid); t = time.perf_counter(); n = 0
            for k in range(20):
                now = int(time.time()*1000)
                rows = [{"id": new_id(), "run_id": new_id(), "name": "noop", "queue": "q", "input": {"seq": i}, "tenant_id": None, "idempotency_key": new_id(), "max_attempts": 3, "at": None, "run_at_ms": now, "traceparent": None, "enqueued_by": None} for i in range(500)]
                args = [orjson.dumps(rows).decode(), now]
                if label == "enqueue_many": args += [now // 250, now + 1000]
                await c.fetch(sql, *args); n += 500
            w = time.perf_counter() - t
            res[label].append((round(n/w), round(1e6*(proc_cpu(pid)-p0)/n)))
    for k, v in res.items(): print(k, v)
    await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
