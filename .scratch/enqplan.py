import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_ep"
import pg_driver_micro as b
import asyncpg
from shared.sql import query
from shared.ids import new_id
async def main():
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c)
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=1, max_size=1)
    d = b.postgres_driver(pool)
    await b.enqueue_batch(d, 5000)
    await c.execute("vacuum analyze x_jobs")
    await c.execute("set plan_cache_mode = force_generic_plan")
    await c.execute("prepare p(text,text,text,text,text,text,text,int,bigint,bigint,text,text,bigint) as " + query("enqueue"))
    now = int(time.time()*1000)
    for i in range(8):
        await c.execute(f"execute p('{new_id()}','{new_id()}','noop','bench','{{}}',null,'{new_id()}',3,{now},{now},null,null,{now//250})")
    for r in await c.fetch(f"explain (analyze, buffers) execute p('{new_id()}','{new_id()}','noop','bench','{{}}',null,'{new_id()}',3,{now},{now},null,null,{now//250})"): print(r[0])
    await pool.close(); await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
asyncio.run(main())
