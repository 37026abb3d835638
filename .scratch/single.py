import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_single"
import pg_driver_micro as b
import asyncpg
def proc_cpu(pid):
    with open(f"/proc/{pid}/stat") as f: parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c)
    await c.execute("create table t_floor (id bigserial primary key, v text)")
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=1, max_size=1)
    d = b.postgres_driver(pool)
    n = 2000
    for rnd in range(2):
        pid = await pool.fetchval("select pg_backend_pid()")
        pg0 = proc_cpu(pid); t = time.perf_counter()
        for i in range(n): await pool.execute("insert into t_floor (v) values ($1)", "x")
        w = time.perf_counter() - t; print(f"floor insert {n/w:.0f}/s pg {1e6*(proc_cpu(pid)-pg0)/n:.0f}us")
        pg0 = proc_cpu(pid); p0 = time.process_time(); t = time.perf_counter()
        for i in range(n): await d.enqueue(b.request(rnd * 100000 + i))
        w = time.perf_counter() - t; print(f"enqueue {n/w:.0f}/s pg {1e6*(proc_cpu(pid)-pg0)/n:.0f}us py {1e6*(time.process_time()-p0)/n:.0f}us")
    await pool.close(); await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
