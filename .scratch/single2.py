import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_s2"
import pg_driver_micro as b
import asyncpg
from shared.sql import query
from shared.ids import new_id
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}", server_settings={"plan_cache_mode": "force_generic_plan"}); await b.migrate(c)
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=1, max_size=2)
    d = b.postgres_driver(pool)
    ENQ = query("enqueue")
    n = 1000
    for rnd in range(3):
        t = time.perf_counter()
        for i in range(n):
            now = int(time.time() * 1000)
            await c.fetch(ENQ, new_id(), new_id(), "noop", "q", '{"seq": 1}', None, new_id(), 3, now, now, None, None, now // 250)
        print("raw", round(n / (time.perf_counter() - t)))
        t = time.perf_counter()
        for i in range(n):
            await d.enqueue(b.request(rnd * 10000 + i))
        print("driver", round(n / (time.perf_counter() - t)))
    await d.close(); await pool.close(); await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
