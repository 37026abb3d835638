"""A Node producer (the npm ``nats`` client) against a live ``ujobs api`` with its NATS edge:
the "Enqueue over NATS" guide's snippet (docs/guides/nats-enqueue.md) run as written, and a
producer publishing through JetStream. Skipped only where node or the npm package is missing
(``.ci/run`` installs it into ``tests/e2e/node_nats`` when npm reaches the registry)."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import asyncpg
import nats
import orjson
import pytest

from tests.e2e.live_api import live_api
from tests.services.nats_support import drop_streams, unique_prefix
from tests.support.docs import first_block, page
from ujobs.services.nats.names import NatsNames

pytestmark = pytest.mark.slow

NODE_DIR = Path(__file__).parent / "node_nats"
PRODUCER = """
import { connect, headers } from "nats";
const prefix = process.env.UJOBS_NATS_PREFIX;
const nc = await connect({ servers: process.env.NATS_URL });
const js = nc.jetstream();
for (let i = 0; i < 20; i++) {
  const h = headers();
  h.set("Authorization", `Bearer ${process.env.UJOBS_TOKEN}`);
  const data = new TextEncoder().encode(JSON.stringify({ input: { org_id: `org-${i}` } }));
  // Each message twice under one msgID: a producer retrying a publish it lost the ack of.
  for (let attempt = 0; attempt < 2; attempt++) {
    await js.publish(`${prefix}.js.enqueue.onboard_org`, data, { headers: h, msgID: `m-${i}` });
  }
}
await nc.drain();
"""


def _node_ready() -> bool:
    return shutil.which("node") is not None and (NODE_DIR / "node_modules" / "nats").is_dir()


def guide_snippet() -> str:
    return first_block(page("guides/nats-enqueue.md"), "js")


def _run_node(code: str, folder: Path, env: dict[str, str]) -> list[str]:
    folder.mkdir()
    (folder / "node_modules").symlink_to(NODE_DIR / "node_modules")
    (folder / "script.mjs").write_text(code)
    done = subprocess.run(
        ["node", "script.mjs"],
        cwd=folder,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.splitlines()


async def _wait_rows(dsn: str, count: int) -> list[Any]:
    conn = await asyncpg.connect(dsn)
    try:
        deadline = time.monotonic() + 60
        while True:
            rows = await conn.fetch("select id, tenant_id from x_jobs where name = 'onboard_org'")
            if len(rows) >= count or time.monotonic() > deadline:
                return list(rows)
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def _drained(nats_url: str, names: NatsNames) -> None:
    nc = await nats.connect(nats_url)
    try:
        js = nc.jetstream()
        deadline = time.monotonic() + 60
        while True:
            info = await js.consumer_info(names.enqueue_stream, names.durable)
            if info.num_pending == 0 and info.num_ack_pending == 0:
                return
            assert time.monotonic() < deadline, "the api never drained the stream"
            await asyncio.sleep(0.05)
    finally:
        await nc.close()


async def _cleanup(nats_url: str, names: NatsNames) -> None:
    nc = await nats.connect(nats_url)
    await drop_streams(nc, names)
    await nc.close()


@pytest.mark.skipif(not _node_ready(), reason="node or the npm nats package is missing")
def test_node_producers_enqueue_over_nats(pg_dsn: str, nats_url: str, tmp_path: Path) -> None:
    names = NatsNames(unique_prefix())
    env = {"NATS_URL": nats_url, "UJOBS_NATS_PREFIX": names.prefix}
    try:
        with live_api(pg_dsn, app="ujobs.services.example_app:api", tenant="acme", **env) as api:
            lines = _run_node(
                guide_snippet(), tmp_path / "guide", {**env, "UJOBS_TOKEN": api.tenant_token}
            )
            reply, ack = (orjson.loads(line) for line in lines)
            assert reply["deduped"] is False
            assert ack["stream"] == names.enqueue_stream
            asyncio.run(_drained(nats_url, names))
            [row] = asyncio.run(_wait_rows(pg_dsn, 1))
            assert (row["id"], row["tenant_id"]) == (reply["id"], "acme")  # the publish deduped
            _run_node(PRODUCER, tmp_path / "producer", {**env, "UJOBS_TOKEN": api.token})
            asyncio.run(_drained(nats_url, names))
            rows = asyncio.run(_wait_rows(pg_dsn, 21))
            assert sorted(r["tenant_id"] for r in rows) == sorted(
                ["acme", *(f"org-{i}" for i in range(20))]
            )
    finally:
        asyncio.run(_cleanup(nats_url, names))
