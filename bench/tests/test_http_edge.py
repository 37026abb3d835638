"""bench/http_edge.py end to end at a tiny size: its api process starts, every request of every
phase is answered 2xx (the bench exits non-zero otherwise: a figure over failed requests would
be fiction), and the line carries every figure, ratio and target the docs' row reads."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import orjson

from tests.support import servers

ROOT = Path(__file__).resolve().parents[2]


def test_one_line_with_every_figure() -> None:
    parts = urlsplit(servers.database_admin_url())
    base = urlunsplit((parts.scheme, parts.netloc, "", "", ""))
    database = f"bench_http_t_{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UJOBS_")}
    env.update(
        BENCH_PG=base,
        BENCH_HTTP_DB=database,
        BENCH_HTTP_N="60",
        BENCH_HTTP_CLIENTS="8",
        BENCH_HTTP_LAT_N="20",
        BENCH_HTTP_BATCHES="2",
        BENCH_HTTP_ROUNDS="2",
    )
    done = subprocess.run(
        [sys.executable, "bench/http_edge.py"], cwd=ROOT, env=env, capture_output=True,
        text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    [line] = done.stdout.strip().splitlines()
    figures = orjson.loads(line)
    for key in (
        "noop_route_per_s", "http_enqueue_per_s", "http_enqueue_p50_ms", "http_enqueue_p99_ms",
        "inprocess_enqueue_p50_ms", "http_batch_rows_per_s", "inprocess_batch_rows_per_s",
    ):  # fmt: skip
        assert figures[key] > 0, key
    assert set(figures["ratios"]) == {"http_vs_noop_route", "http_batch_vs_inprocess_batch"}
    assert set(figures["targets"]) == {*figures["ratios"], "http_p50_minus_inprocess_ms"}
    assert len(figures["rounds"]) == 2
