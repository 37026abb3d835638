import asyncio, sys, os, time, cProfile, pstats
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_pb"
import pg_driver_micro as b
import asyncpg
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c); await c.close()
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=1, max_size=1)
    d = b.postgres_driver(pool)
    reqs = [[b.request(lo + i) for i in range(500)] for lo in range(0, 20000, 500)]
    t = time.perf_counter(); p = time.process_time()
    pr = cProfile.Profile(); pr.enable()
    for r in reqs: await d.enqueue_many(r)
    pr.disable()
    print("rate", 20000 / (time.perf_counter() - t), "py cpu/job us", 1e6 * (time.process_time() - p) / 20000)
    pstats.Stats(pr).sort_stats("tottime").print_stats(14)
    await pool.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
