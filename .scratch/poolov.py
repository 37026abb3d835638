import asyncio, sys, time
sys.path.insert(0, ".")
from shared.drivers.postgres_pool import postgres_pool
import asyncpg
async def main():
    dsn = "postgresql://postgres@127.0.0.1/postgres"
    pool = await postgres_pool(dsn, min_size=1, max_size=1)
    c = await asyncpg.connect(dsn)
    n = 5000
    for _ in range(2):
        t = time.perf_counter()
        for i in range(n): await c.fetchval("select 1")
        print("conn", n / (time.perf_counter() - t))
        t = time.perf_counter()
        for i in range(n): await pool.fetchval("select 1")
        print("pool", n / (time.perf_counter() - t))
        t = time.perf_counter()
        for i in range(n):
            async with pool.acquire() as cc: await cc.fetchval("select 1")
        print("pool acquire", n / (time.perf_counter() - t))
    await pool.close(); await c.close()
asyncio.run(main())
