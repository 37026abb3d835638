"""bench/settlements_relays.py end to end at a tiny size: both relays publish their whole
backlog (a relay short of it stops the bench), the line carries both paces and their ratio,
and the bench leaves no stream, Redis key or database behind."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import nats
import orjson
from redis.asyncio import Redis

from tests.support import servers
from ujobs.drivers.redis.settlements import settlements_key

ROOT = Path(__file__).resolve().parents[2]


async def test_one_line_with_both_paces(nats_url: str, redis_url: str) -> None:
    parts = urlsplit(servers.database_admin_url())
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    prefix = f"bsettlet{uuid.uuid4().hex[:8]}"
    db = f"bench_settle_t_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
    env.update(
        BENCH_PG=base,
        BENCH_SETTLE_DB=db,
        BENCH_NATS_URL=nats_url,
        BENCH_REDIS_URL=redis_url,
        BENCH_SETTLE_N="200",
        BENCH_SETTLE_ROUNDS="2",
        BENCH_SETTLE_PREFIX=prefix,
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "bench/settlements_relays.py"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    [line] = done.stdout.strip().splitlines()
    figures = orjson.loads(line)
    assert figures["postgres_relay_per_s"] > 0
    assert figures["redis_relay_per_s"] > 0
    assert [len(v) for v in figures["rounds_per_s"].values()] == [2, 2]
    assert set(figures["ratios"]) == {"redis_vs_postgres"}
    nc = await nats.connect(nats_url)
    try:
        left = {info.config.name for info in await nc.jetstream().streams_info()}
    finally:
        await nc.close()
    assert {f"{prefix.upper()}_ENQUEUE", f"{prefix.upper()}_SETTLED"} & left == set()
    client = Redis.from_url(redis_url)
    try:
        assert not await client.exists(settlements_key(prefix))
    finally:
        await client.aclose()
    admin = await asyncpg.connect(servers.database_admin_url())
    try:
        assert await admin.fetchval("select 1 from pg_database where datname = $1", db) is None
    finally:
        await admin.close()
