import asyncio, sys, os, time, cProfile, pstats
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_ps"
import pg_driver_micro as b
import asyncpg
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c); await c.close()
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=1, max_size=1)
    d = b.postgres_driver(pool)
    pr = cProfile.Profile(); pr.enable()
    for i in range(2000): await d.enqueue(b.request(i))
    pr.disable()
    pstats.Stats(pr).sort_stats("tottime").print_stats(18)
    await pool.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
