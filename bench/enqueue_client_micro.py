"""The batch enqueue's client work per row, alone: prints ONE JSON line.

    python bench/enqueue_client_micro.py                   # CPU per row (getrusage)
    BENCH_CALLGRIND=1 python bench/enqueue_client_micro.py # instructions per row (valgrind)
    BENCH_N=500 BENCH_K=20 BENCH_CPU_K=400 ...             # rows a batch, batches counted

Issue 42's batch figure against pgqueuer turned on the client's CPU per row, not the
server's (bench/RESULTS.md). This runs exactly the harness's batch path (``handle.enqueue_many``
over a generator of inputs → the announcing wrapper → the Postgres driver's COPY, the
``bench/bench_ujobs.py`` job's input, key and tenant) against a stand-in for the driver's held
connections that swallows the COPY's bytes and answers every other statement with no rows, so
nothing but this process's own work is counted.

``instructions_per_row`` (``BENCH_CALLGRIND=1``): this script runs itself twice under
``valgrind --tool=callgrind --instr-atstart=no``, with K batches and with none, collecting only
between ``callgrind_control -i on`` and ``-i off`` around the batches (one warm-up batch before,
in both), and reports (K minus none) / (K x N). The one figure comparable across runs on a
machine whose cores other work shares. ``cpu_us_per_row`` (user + system from ``getrusage``,
``BENCH_CPU_K`` batches, after the warm-up) is for a quiet machine only: other processes on the
same cores move it.
"""

from __future__ import annotations

import asyncio
import os
import re
import resource
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterable, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson

from ujobs import job, t
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.execution.run import Run
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.wake.announce import announcing

N = int(os.environ.get("BENCH_N", "500"))
K = int(os.environ.get("BENCH_K", "20"))
CPU_K = int(os.environ.get("BENCH_CPU_K", "400"))
TS0 = 1_765_000_000.0
"""The first input's ``ts``: fixed, so every run builds the same inputs."""


@job(
    name="enqueue-client-micro",
    input=t.object(seq=t.number.int(), ts=t.number),
    idempotency_key=lambda i: f"bench:{i.seq}:{i.ts!r}",
    tenant="none",
    queue="bench",
)
async def micro_noop(run: Run[Any]) -> None:
    """Never run: the bench only enqueues (the harness's ``bench_noop`` shape)."""


class SwallowingConnection:
    """A connection that takes a COPY's bytes and counts its lines, and answers every other
    statement (the wake) with no rows."""

    def __init__(self) -> None:
        self.lines = 0
        self.bytes = 0
        self.last: bytes = b""
        """The last chunk of COPY text (a test reads its lines)."""

    async def copy_to_table(self, table: str, *, source: AsyncIterable[bytes], columns: Any) -> str:
        async for chunk in source:
            self.lines += chunk.count(b"\n")
            self.bytes += len(chunk)
            self.last = chunk
        return "COPY"

    async def fetch(self, sql: str, *args: Any) -> list[Any]:
        return []


class SwallowingConnections:
    """Stands in for the driver's ``HeldConnections``: every call runs on one
    ``SwallowingConnection``."""

    def __init__(self) -> None:
        self.conn = SwallowingConnection()

    async def run(self, call: Callable[[Any], Awaitable[Any]]) -> Any:
        return await call(self.conn)


def swallowing_driver() -> tuple[PostgresDriver, SwallowingConnection]:
    """The Postgres driver, its enqueues on a ``SwallowingConnections`` (a bench's probe of
    a private seam, not an API); no pool is ever touched."""
    driver = postgres_driver(pool=None)  # type: ignore[arg-type]
    conns = SwallowingConnections()
    driver._enqueuer._conns = conns  # type: ignore[assignment]
    return driver, conns.conn


def inputs(batch: int, n: int) -> Iterator[dict[str, Any]]:
    """The harness's inputs (``bench_ujobs.enqueue_batch``): a generator, read as the COPY
    goes out; each batch's keys are new."""
    base = batch * n
    return ({"seq": base + i, "ts": TS0 + (base + i) / 1000} for i in range(n))


async def run_batches(first: int, k: int, n: int) -> int:
    """``k`` batches of ``n`` rows through ``handle.enqueue_many``; answers the rows queued."""
    queued = 0
    for batch in range(first, first + k):
        queued += len(await micro_noop.enqueue_many(inputs(batch, n)))
    return queued


def instrument(state: str) -> None:
    """``callgrind_control -i on|off`` on this process when running under callgrind."""
    if os.environ.get("BENCH_CALLGRIND_CHILD") == "1":
        subprocess.run(
            ["callgrind_control", "-i", state, str(os.getpid())],
            check=True,
            stdout=subprocess.DEVNULL,
        )


async def measure(k: int, n: int) -> dict[str, Any]:
    """One warm-up batch, then ``k`` counted ones: rows, COPY lines and CPU seconds."""
    driver, conn = swallowing_driver()
    set_job_driver(announcing(driver))
    try:
        await run_batches(0, 1, n)
        instrument("on")
        before = resource.getrusage(resource.RUSAGE_SELF)
        rows = await run_batches(1, k, n)
        after = resource.getrusage(resource.RUSAGE_SELF)
        instrument("off")
    finally:
        set_job_driver(None)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"rows": rows, "copy_lines": conn.lines - n, "cpu_s": cpu}


_TOTALS = re.compile(r"^totals:\s*(\d+)", re.MULTILINE)


def callgrind_total(text: str) -> int:
    """The instructions a callgrind output file collected (its ``totals:`` line; with
    ``--instr-atstart=no`` its ``summary:`` line reads 0)."""
    found = _TOTALS.search(text)
    if found is None:
        raise ValueError("no totals line in the callgrind output")
    return int(found.group(1))


def instructions(k: int, n: int) -> int:
    """Instructions collected by this script's child run of ``k`` batches under callgrind."""
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "callgrind.out"
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
            ],
            check=True,
            env={
                **os.environ,
                "BENCH_CALLGRIND_CHILD": "1",
                "BENCH_K": str(k),
                "BENCH_N": str(n),
            },
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return callgrind_total(out.read_text())


def main() -> None:
    if os.environ.get("BENCH_CALLGRIND_CHILD") == "1":
        asyncio.run(measure(K, N))
        return
    figures: dict[str, Any] = {"bench": "enqueue_client_micro", "rows_per_batch": N}
    if os.environ.get("BENCH_CALLGRIND") == "1":
        counted, none = instructions(K, N), instructions(0, N)
        figures["batches"] = K
        figures["instructions_per_row"] = round((counted - none) / (K * N))
    else:
        run = asyncio.run(measure(CPU_K, N))
        figures["batches"] = CPU_K
        figures["cpu_us_per_row"] = round(run["cpu_s"] * 1e6 / run["rows"], 2)
    print(orjson.dumps(figures).decode())


if __name__ == "__main__":
    main()
