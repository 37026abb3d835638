import asyncio, sys, os, time, resource
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_cpu"
import pg_driver_micro as b
import asyncpg
def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c)
    ss = {"plan_cache_mode": os.environ["PLAN"]} if os.environ.get("PLAN") else {}
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=18, max_size=20, server_settings=ss)
    d = b.postgres_driver(pool)
    n = int(os.environ.get("N", "20000"))
    if os.environ.get("HIST"): await b.add_history(pool, int(os.environ["HIST"]))
    await b.enqueue_batch(d, n)
    await c.execute("vacuum analyze x_jobs")
    pids = [r[0] for r in await c.fetch("select pid from pg_stat_activity where datname=$1 and pid<>pg_backend_pid()", b.DB)]
    pg0 = sum(proc_cpu(p) for p in pids); py0 = time.process_time(); w = time.perf_counter()
    rate = await b.drain_worker_style(d, n)
    wall = time.perf_counter() - w
    pg1 = sum(proc_cpu(p) for p in pids); py1 = time.process_time()
    print(f"rate {rate:.0f}/s wall {wall:.2f}s py_cpu {py1-py0:.2f}s pg_cpu {pg1-pg0:.2f}s  per job: py {1e6*(py1-py0)/n:.0f}us pg {1e6*(pg1-pg0)/n:.0f}us")
    await pool.close(); await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
