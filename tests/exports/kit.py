"""Helpers for the export tests: run an export's attempts on a memory driver, read its files."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, JobDriver
from ujobs.drivers.memory import MemoryDriver, memory_driver
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.exports.sources import IteratorSource, iterate
from ujobs.jobs.job import JobHandle

T0 = 1_700_000_000_000


def frozen_driver() -> MemoryDriver:
    return memory_driver(clock=FrozenClock(T0))


async def enqueue(driver: JobDriver, handle: JobHandle[Any], input: Any = None) -> str:
    return (await driver.enqueue(handle.request(input, clock=driver.clock))).id


async def attempt(driver: JobDriver, handle: JobHandle[Any], *, ctx: Any = None) -> JobExecution:
    """Claim the one due export and run one attempt of it."""
    claimed = await driver.claim(
        ClaimOptions(queues=[handle.queue], limit=1, worker_id="w1", visibility_ms=60_000)
    )
    assert len(claimed) == 1, "expected one due export"
    return await execute_job(claimed[0], driver=driver, handle=handle, context=ctx)


def numbered(n: int, *, fail_at: int | None = None, reads: list[int] | None = None) -> Any:
    """A source of ``n`` rows ``{"id": i, "name": f"row {i}"}``; ``fail_at`` raises once when
    row ``fail_at`` would be read; ``reads`` records where each iterator started."""
    failed: list[bool] = []

    def source(_: Any) -> IteratorSource[dict[str, Any]]:
        async def rows(start: int) -> AsyncIterator[dict[str, Any]]:
            if reads is not None:
                reads.append(start)
            for i in range(start, n):
                if fail_at is not None and i == fail_at and not failed:
                    failed.append(True)
                    raise ConnectionError("the database went away mid-page")
                yield {"id": i, "name": f"row {i}"}

        return iterate(rows)

    return source


def files(root: Path) -> dict[str, bytes]:
    """Every object under ``root`` by its key."""
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }
