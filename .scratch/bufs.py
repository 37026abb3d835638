import asyncio, sys, os, time
sys.path.insert(0, "."); sys.path.insert(0, "bench")
os.environ["BENCH_DB"] = "ujobs_bench_bufs"
import pg_driver_micro as b
import asyncpg
from shared.sql import query
from shared.drivers.base import ClaimOptions
async def run(hist):
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)'); await b.admin(f'CREATE DATABASE "{b.DB}"')
    c = await asyncpg.connect(f"{b.PG}/{b.DB}"); await b.migrate(c)
    pool = await b.postgres_pool(f"{b.PG}/{b.DB}", min_size=2, max_size=4)
    d = b.postgres_driver(pool)
    if hist: await b.add_history(pool, hist)
    await b.enqueue_batch(d, 2000)
    await c.execute("vacuum analyze x_jobs")
    now = int(time.time()*1000)
    await c.execute("set plan_cache_mode = force_generic_plan")
    # a claim of 16 then explain ack of those
    jobs = await d.claim(ClaimOptions(queues=[b.QUEUE], limit=16, worker_id="w"))
    args = ([j.id for j in jobs], [j.worker_id for j in jobs], [j.claim for j in jobs], [0]*16, [None]*16, now, 60000, now - now % 60000)
    r = await c.fetch("explain (analyze, buffers, format json) " + query("ack"), *args)
    import json
    plan = json.loads(r[0][0])[0]
    print(hist, "ack buffers", plan["Plan"]["Shared Hit Blocks"], plan["Plan"].get("Shared Read Blocks"), "time", plan["Execution Time"])
    args = ([b.QUEUE], 16, "w2", now, 30000, [], 60000, now - now % 60000)
    r = await c.fetch("explain (analyze, buffers, format json) " + query("claim"), *args)
    plan = json.loads(r[0][0])[0]
    print(hist, "claim buffers", plan["Plan"]["Shared Hit Blocks"], plan["Plan"].get("Shared Read Blocks"), "time", plan["Execution Time"], "planning", plan["Planning Time"])
    reqs = [b.request(900000 + i) for i in range(500)]
    t = time.perf_counter(); await d.enqueue_many(reqs); print(hist, "batch500 ms", (time.perf_counter()-t)*1000)
    await pool.close(); await c.close()
    await b.admin(f'DROP DATABASE IF EXISTS "{b.DB}" WITH (FORCE)')
async def main():
    await run(0); await run(1000000)
asyncio.run(main())
