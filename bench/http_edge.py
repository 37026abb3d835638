"""The HTTP edge against the same work done in process: prints ONE JSON line.

    .venv/bin/python bench/http_edge.py

A real ``ujobs api`` process (``--port 0``, this folder's ``http_edge_app``: one no-op job whose
key is its ``seq``) on the database ``BENCH_HTTP_DB`` (default ``bench_http``, created anew on
``BENCH_PG`` and dropped at the end), an operator token minted for it, and the load generated
from a process of its own (this script with ``--load``: an aiohttp client, one connection per
concurrent client). Figures, in order:

* ``noop_route_per_s``: ``GET /healthz`` from ``BENCH_HTTP_CLIENTS`` (64) clients: the HTTP
  ceiling of this api process, nothing behind it;
* ``http_enqueue_per_s``: single enqueues (``POST /v1/jobs/bench.noop``), 64 clients,
  ``BENCH_HTTP_N`` (10,000) requests: token lookup, validation, group commit, 202; sent in
  chunks alternating with the noop route's (``CHUNKS``);
* ``http_enqueue_p50_ms`` / ``p99_ms`` against ``inprocess_enqueue_p50_ms``: one client,
  ``BENCH_HTTP_LAT_N`` (1,000) calls, an HTTP enqueue then a ``job.enqueue`` in this process on
  the same database IN TURN, so the machine's drift hits both alike;
* ``http_batch_rows_per_s`` against ``inprocess_batch_rows_per_s``: one caller, 500 inputs a
  request (``/batch``) then ``job.enqueue_many`` of 500, in turn, ``BENCH_HTTP_BATCHES`` (40)
  of each.

``x_jobs`` is emptied before each phase so both sides write into the same table size. It all
runs ``BENCH_HTTP_ROUNDS`` (3) times; each figure is the median over the rounds and each ratio
the median of the rounds' own (``rounds`` lists them). ``ratios``: ``http_vs_noop_route``
(issue 23 asks >= 0.5: the whole enqueue, commit included, costs no more than the HTTP around
it), ``http_batch_vs_inprocess_batch`` (>= 0.7); ``targets`` judges each, with
``http_p50_minus_inprocess_ms`` (<= 1).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

from api_process import start_api  # noqa: E402  (beside this script)
from bench_db import drop_database, fresh_database  # noqa: E402

DB_NAME = os.environ.get("BENCH_HTTP_DB", "bench_http")
CLIENTS = int(os.environ.get("BENCH_HTTP_CLIENTS", "64"))
N = int(os.environ.get("BENCH_HTTP_N", "10000"))
LAT_N = int(os.environ.get("BENCH_HTTP_LAT_N", "1000"))
BATCHES = int(os.environ.get("BENCH_HTTP_BATCHES", "40"))
BATCH = 500
ROUNDS = int(os.environ.get("BENCH_HTTP_ROUNDS", "3"))
JOB = "bench.noop"


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))]


# --- the load generator (its own process) ----------------------------------------------------


CHUNKS = 5
"""A round's noop and enqueue requests go in this many alternating chunks (noop, enqueue, noop,
...), so the two rates see the same minutes of a machine whose speed drifts."""


async def load(mode: str, url: str, token: str, clients: int, n: int, start: int) -> dict[str, Any]:
    """``mode`` ``warm``: ``n`` noop requests; ``pair``: ``n`` of each, in alternating chunks."""
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=clients)
    failures = 0
    elapsed = {"noop": 0.0, "enqueue": 0.0}

    async with aiohttp.ClientSession(connector=connector, headers=headers) as http:

        async def chunk(kind: str, seqs: range) -> None:
            counter = iter(seqs)

            async def client() -> None:
                nonlocal failures
                for seq in counter:
                    if kind == "noop":
                        request = http.get(url + "/healthz")
                    else:
                        data = orjson.dumps({"input": {"seq": seq}})
                        request = http.post(f"{url}/v1/jobs/{JOB}", data=data)
                    async with request as response:
                        await response.read()
                        if response.status not in (200, 202):
                            failures += 1

            t0 = time.perf_counter()
            await asyncio.gather(*(client() for _ in range(clients)))
            elapsed[kind] += time.perf_counter() - t0

        if mode == "warm":
            await chunk("noop", range(n))
            return {"failures": failures}
        size = max(1, n // CHUNKS)
        for c in range(CHUNKS):
            await chunk("noop", range(size))
            await chunk("enqueue", range(start + c * size, start + (c + 1) * size))
    done = size * CHUNKS
    return {
        "noop_per_s": done / elapsed["noop"],
        "enqueue_per_s": done / elapsed["enqueue"],
        "failures": failures,
    }


def run_load(mode: str, api: dict[str, str], clients: int, n: int, start: int) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, __file__, "--load", mode, api["url"], api["token"],
         str(clients), str(n), str(start)],
        capture_output=True, text=True, check=True, timeout=900,
    )  # fmt: skip
    result: dict[str, Any] = json.loads(done.stdout)
    if result["failures"]:
        raise SystemExit(f"{mode}: {result['failures']} requests failed")
    return result


async def mint(pool: asyncpg.Pool[Any]) -> str:
    from ujobs.services.api.tokens import TokenStore

    issued = await TokenStore(pool).create(tenant=None, scopes=["enqueue:*"], name="bench")
    return issued.secret


async def empty(pool: asyncpg.Pool[Any]) -> None:
    await pool.execute("truncate x_jobs")
    await pool.execute("vacuum analyze x_jobs")


async def side_by_side(pool: asyncpg.Pool[Any], api: dict[str, str], seq0: int) -> dict[str, float]:
    """One client, HTTP and in process IN TURN (one HTTP call, then one ``job.enqueue``; one
    ``/batch`` of 500, then one ``enqueue_many`` of 500), so a minute when the machine slows
    down slows both alike. The HTTP calls come from this process's aiohttp client."""
    from http_edge_app import noop

    headers = {"Authorization": f"Bearer {api['token']}", "Content-Type": "application/json"}
    http_lat: list[float] = []
    ours_lat: list[float] = []
    http_batch_s = ours_batch_s = 0.0
    async with aiohttp.ClientSession(headers=headers) as http:
        await empty(pool)
        for n in range(LAT_N):
            seq = seq0 + 2 * n
            t0 = time.perf_counter()
            body = orjson.dumps({"input": {"seq": seq}})
            async with http.post(f"{api['url']}/v1/jobs/{JOB}", data=body) as r:
                await r.read()
                assert r.status == 202, r.status
            t1 = time.perf_counter()
            await noop.enqueue({"seq": seq + 1})
            t2 = time.perf_counter()
            http_lat.append(t1 - t0)
            ours_lat.append(t2 - t1)
        await empty(pool)
        for b in range(BATCHES):
            first = seq0 + 2 * b * BATCH
            inputs = [{"seq": s} for s in range(first, first + BATCH)]
            t0 = time.perf_counter()
            body = orjson.dumps({"inputs": inputs})
            async with http.post(f"{api['url']}/v1/jobs/{JOB}/batch", data=body) as r:
                await r.read()
                assert r.status == 202, r.status
            t1 = time.perf_counter()
            await noop.enqueue_many({"seq": s} for s in range(first + BATCH, first + 2 * BATCH))
            t2 = time.perf_counter()
            http_batch_s += t1 - t0
            ours_batch_s += t2 - t1
    return {
        "http_enqueue_p50_ms": percentile(http_lat, 0.5) * 1000,
        "http_enqueue_p99_ms": percentile(http_lat, 0.99) * 1000,
        "inprocess_enqueue_p50_ms": percentile(ours_lat, 0.5) * 1000,
        "http_batch_rows_per_s": BATCHES * BATCH / http_batch_s,
        "inprocess_batch_rows_per_s": BATCHES * BATCH / ours_batch_s,
    }


def median(rounds: list[dict[str, float]], key: str) -> float:
    return statistics.median(r[key] for r in rounds)


async def main() -> dict[str, Any]:
    from ujobs.drivers.postgres import postgres_driver
    from ujobs.jobs.enqueue_target import set_job_driver

    dsn = await fresh_database(DB_NAME)
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=4)
    assert pool is not None
    set_job_driver(postgres_driver(pool))
    proc, url = start_api(dsn)
    rounds: list[dict[str, float]] = []
    try:
        api = {"url": url, "token": await mint(pool)}
        run_load("warm", api, CLIENTS, min(N, 2_000), 0)  # warm both processes up
        for r in range(ROUNDS):
            seq0 = r * 10 * (N + LAT_N + BATCHES * BATCH)
            await empty(pool)
            pair = run_load("pair", api, CLIENTS, N, seq0)
            rounds.append(
                {
                    "noop_route_per_s": pair["noop_per_s"],
                    "http_enqueue_per_s": pair["enqueue_per_s"],
                    **await side_by_side(pool, api, seq0 + 2 * N),
                }
            )
            last = rounds[-1]
            last["http_vs_noop_route"] = last["http_enqueue_per_s"] / last["noop_route_per_s"]
            last["http_batch_vs_inprocess_batch"] = (
                last["http_batch_rows_per_s"] / last["inprocess_batch_rows_per_s"]
            )
            last["http_p50_minus_inprocess_ms"] = (
                last["http_enqueue_p50_ms"] - last["inprocess_enqueue_p50_ms"]
            )
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        await pool.close()
        await drop_database(DB_NAME)
    figures = {
        key: round(median(rounds, key), 3 if key.endswith("_ms") else None)
        for key in (
            "noop_route_per_s", "http_enqueue_per_s", "http_enqueue_p50_ms",
            "http_enqueue_p99_ms", "inprocess_enqueue_p50_ms", "http_batch_rows_per_s",
            "inprocess_batch_rows_per_s",
        )
    }  # fmt: skip
    ratios = {
        key: round(median(rounds, key), 3)
        for key in ("http_vs_noop_route", "http_batch_vs_inprocess_batch")
    }
    gap = round(median(rounds, "http_p50_minus_inprocess_ms"), 3)
    targets = {
        "http_vs_noop_route": {"at_least": 0.5, "met": ratios["http_vs_noop_route"] >= 0.5},
        "http_batch_vs_inprocess_batch": {
            "at_least": 0.7,
            "met": ratios["http_batch_vs_inprocess_batch"] >= 0.7,
        },
        "http_p50_minus_inprocess_ms": {"value": gap, "at_most": 1.0, "met": gap <= 1},
    }
    return {
        "bench": "http_edge",
        **figures,
        "ratios": ratios,
        "targets": targets,
        "rounds": [
            {
                k: round(v, 3)
                for k, v in r.items()
                if k.startswith(("http_vs", "http_batch_vs", "http_p50"))
            }
            for r in rounds
        ],
        "clients": CLIENTS,
        "n": N,
        "cpus": os.cpu_count(),
    }


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--load":
        mode, url, token, clients, n, start = sys.argv[2:8]
        print(json.dumps(asyncio.run(load(mode, url, token, int(clients), int(n), int(start)))))
    else:
        print(json.dumps(asyncio.run(main()), sort_keys=False))
