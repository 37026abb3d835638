"""The ceiling of the Redis batch enqueue at a backlog: the same commands without our script.

``bench/backlog_scaling.py`` reads the driver's batch enqueue at 10,000 and at 1,000,000 ready
rows. Part of what a big backlog costs it is Redis's own: every row is a key of the
keyspace and an entry of the live index (``{prefix}:live``), and when either reaches a power
of two Redis doubles its table and moves every entry across, a step on each later access
(``dictRehash``), until it is done. ``raw_batch`` writes ``BATCH`` rows with a bare
non-transactional pipeline of the commands ``enqueue.lua`` makes for new rows — per row a
read and a write of its hash; per batch the live index read and written, the seq counter, the
two due zsets and the band's tenant set, the queue set and the tally — with no script and no
dedupe branch, on a queue of its own in the same keyspace. The bench runs one raw batch after
each of its own batches, so both meet the same tables at the same moment; the ratio of the
raw rate at the biggest backlog to the smallest is the bound the driver's own ratio is read
against. It is a loose bound: redis-py packs and parses about a thousand commands a batch,
so the client's time is most of the raw rate, the server's share of the ratio reads diluted
and the bound moves from run to run; the server's own cost of a doubling is read apart, with
``INFO cpu`` on a server of one's own.

``keyspace_doubled`` says whether the keyspace passed a power of two while a phase ran (Redis
grows a table when its entries reach its size), from the ``DBSIZE`` before and after: the
bench's database holds only the bench's keys.
"""

from __future__ import annotations

import time

import orjson
from redis.asyncio import Redis
from redis.typing import EncodableT, FieldT

from ujobs.ids import new_ids

QUEUE = "backlog-raw"
NAME = "backlog-raw"


def live_key(idempotency_key: str) -> str:
    """As ``ujobs.drivers.redis.codec.live_key`` writes it, for a job without a tenant."""
    return orjson.dumps([NAME, "", idempotency_key]).decode()


async def raw_batch(client: Redis, prefix: str, rows: int) -> float:
    """Write ``rows`` new rows as ``enqueue.lua`` would, by a bare pipeline; the seconds it
    took."""
    tag = f"{{{prefix}}}"
    now = int(time.time() * 1000)
    ids = new_ids(rows)
    lks = [live_key(f"raw:{job_id}") for job_id in ids]
    began = time.perf_counter()
    async with client.pipeline(transaction=False) as pipe:
        pipe.hmget(f"{tag}:live", lks)
        for job_id in ids:
            pipe.hmget(f"{tag}:job:{job_id}", ["id", "run_id"])
        first = int(await client.incrby(f"{tag}:seq", rows)) - rows + 1
        members: dict[str, int] = {}
        for n, (job_id, lk) in enumerate(zip(ids, lks, strict=True)):
            seq = first + n
            member = f"{seq:015d}{job_id}"
            members[member] = now
            pipe.hset(f"{tag}:job:{job_id}", mapping=_fields(job_id, lk, seq, member, now))
        pipe.zadd(f"{tag}:q:{QUEUE}", members)
        pipe.zadd(f"{tag}:qt:{len(QUEUE)}:{QUEUE}:0:", members)
        pipe.zadd(f"{tag}:qs:{QUEUE}:0", {"": 0})
        pipe.hset(f"{tag}:live", mapping=dict(zip(lks, ids, strict=True)))
        pipe.sadd(f"{tag}:raw-queues", QUEUE)
        pipe.hincrby(f"{tag}:n:{QUEUE}", "ready", rows)
        await pipe.execute()
    return time.perf_counter() - began


def _fields(job_id: str, lk: str, seq: int, member: str, now: int) -> dict[FieldT, EncodableT]:
    return {
        "id": job_id,
        "run_id": job_id,
        "name": NAME,
        "queue": QUEUE,
        "state": "ready",
        "input": orjson.dumps({"seq": seq, "ts": now / 1000}),
        "key": f"raw:{job_id}",
        "lk": lk,
        "attempt": 0,
        "max_attempts": 3,
        "run_at": now,
        "created_at": now,
        "updated_at": now,
        "seq": seq,
        "m": member,
        "claim": 0,
    }


def keyspace_doubled(before: int, after: int) -> bool:
    """True when a table of ``before`` keys grew to ``after`` past a power of two: Redis
    doubles a table on the insert that finds its entries equal to its size."""
    size = 4
    while size < before:
        size *= 2
    return after > size
