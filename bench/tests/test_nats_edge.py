"""bench/nats_edge.py end to end at a tiny size: its api process starts with the NATS edge,
every phase completes (a refused request or a row short stops the bench), it cleans up its
streams and database, and the line carries every figure, ratio and target the docs read."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import nats
import orjson

from tests.support import servers

ROOT = Path(__file__).resolve().parents[2]


async def test_one_line_with_every_figure(nats_url: str) -> None:
    parts = urlsplit(servers.database_admin_url())
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    prefix = f"bnatst{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
    env.update(
        BENCH_PG=base,
        BENCH_NATS_DB=f"bench_nats_t_{uuid.uuid4().hex[:8]}",
        BENCH_NATS_URL=nats_url,
        BENCH_NATS_N="100",
        BENCH_NATS_CLIENTS="8",
        BENCH_NATS_PREFIX=prefix,
    )
    done = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "bench/nats_edge.py"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    [line] = done.stdout.strip().splitlines()
    figures = orjson.loads(line)
    for key in (
        "http_enqueue_per_s", "nats_request_enqueue_per_s", "jetstream_publish_ceiling_per_s",
        "jetstream_enqueue_per_s", "jetstream_stored_publish_per_s", "jetstream_concurrent_per_s",
        "jetstream_ceiling_phase_per_s", "drain_per_s", "settled_published_per_s",
    ):  # fmt: skip
        assert figures[key] > 0, key
    assert set(figures["ratios"]) == {
        "nats_request_vs_http",
        "jetstream_vs_publish_ceiling",
        "jetstream_concurrent_vs_publish_ceiling",
        "settled_vs_drain",
        "settled_end_to_end_vs_drain",
    }
    assert set(figures["targets"]) == set(figures["ratios"]) - {
        "settled_end_to_end_vs_drain",
        "jetstream_concurrent_vs_publish_ceiling",
    }
    assert set(figures["bounds"]) == {"jetstream_concurrent_vs_publish_ceiling"}
    # The ceiling is the better of the run's two publish-only phases.
    assert figures["jetstream_publish_ceiling_per_s"] == max(
        figures["jetstream_ceiling_phase_per_s"], figures["jetstream_stored_publish_per_s"]
    )
    roles = {"publisher", "nats_server", "api", "postgres"}
    assert set(figures["jetstream_cpu_us_per_msg"]) == roles
    assert set(figures["jetstream_drain_cpu_us_per_msg"]) == roles
    assert set(figures["ceiling_cpu_us_per_msg"]) == {"publisher", "nats_server"}
    assert figures["settled_waiting_at_last_ack"] >= 0
    nc = await nats.connect(nats_url)
    try:
        left = {info.config.name for info in await nc.jetstream().streams_info()}
    finally:
        await nc.close()
    mine = {f"{prefix.upper()}_{kind}" for kind in ("ENQUEUE", "SETTLED", "CEILING")}
    assert left & mine == set(), "the bench left its streams behind"
