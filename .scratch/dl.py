import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_dl"
import pg_driver_micro as b
import asyncpg
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c); await c.close()
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=18, max_size=20, server_settings={"log_lock_waits": "on", "deadlock_timeout": "50ms", "application_name": "dltest"})
    d = b.postgres_driver(pool)
    for rep in range(4):
        await b.reset_queue(pool)
        await b.enqueue_batch(d, 10000, offset=rep * 100000)
        try:
            print(await b.drain_single_claimers(d, 10000))
        except Exception as e:
            print("ERR", e); break
    await pool.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
