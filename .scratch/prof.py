import asyncio, sys, time, cProfile, pstats, os
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_prof"
import pg_driver_micro as b
import asyncpg
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c); await c.close()
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=18, max_size=20)
    d = b.postgres_driver(pool)
    await b.enqueue_batch(d, 10000)
    pr = cProfile.Profile(); t=time.process_time(); w=time.perf_counter(); pr.enable()
    r = await b.drain_worker_style(d, 10000)
    pr.disable(); print("rate", r, "cpu", time.process_time()-t, "wall", time.perf_counter()-w)
    pstats.Stats(pr).sort_stats("tottime").print_stats(25)
    await pool.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
