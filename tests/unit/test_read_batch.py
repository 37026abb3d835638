"""ReadBatcher: concurrent reads share a statement, and none is answered by a statement sent
before it asked."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence

import pytest

from ujobs.drivers.postgres.read_batch import ReadBatcher


async def until(condition: Callable[[], object]) -> None:
    """Let the loop run until ``condition()`` holds (a few turns at most)."""
    for _ in range(100):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the batcher never got there")


class Source:
    """A store whose values change between statements, and whose statement we hold open."""

    def __init__(self) -> None:
        self.version = 0
        self.statements: list[list[str]] = []
        self.gate = asyncio.Event()
        self.gate.set()

    async def fetch(self, keys: Sequence[str]) -> Mapping[str, str]:
        self.statements.append(list(keys))
        seen = self.version
        await self.gate.wait()
        return {k: f"{k}@{seen}" for k in keys if k != "missing"}


async def test_reads_that_arrive_together_share_one_statement() -> None:
    source = Source()
    batcher: ReadBatcher[str, str] = ReadBatcher(source.fetch)
    source.gate.clear()
    first = asyncio.ensure_future(batcher.read("a"))
    await until(lambda: source.statements)
    rest = [asyncio.ensure_future(batcher.read(k)) for k in ("b", "c", "b", "missing")]
    await asyncio.sleep(0)
    source.gate.set()
    answers = [await first] + [await r for r in rest]
    assert answers == ["a@0", "b@0", "c@0", "b@0", None]
    assert source.statements == [["a"], ["b", "c", "missing"]]


async def test_a_read_asked_during_a_statement_waits_for_the_next_one() -> None:
    source = Source()
    batcher: ReadBatcher[str, str] = ReadBatcher(source.fetch)
    source.gate.clear()
    early = asyncio.ensure_future(batcher.read("a"))
    await until(lambda: source.statements)
    source.version = 1  # the row changed after the first statement began
    late = asyncio.ensure_future(batcher.read("a"))
    await asyncio.sleep(0)
    source.gate.set()
    assert (await early, await late) == ("a@0", "a@1")


async def test_a_failed_statement_fails_its_readers_only() -> None:
    calls = 0

    async def fetch(keys: Sequence[str]) -> Mapping[str, str]:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.sleep(0)
            raise RuntimeError("connection lost")
        return {k: k for k in keys}

    batcher: ReadBatcher[str, str] = ReadBatcher(fetch)
    first = asyncio.ensure_future(batcher.read("a"))
    await asyncio.sleep(0)
    second = asyncio.ensure_future(batcher.read("b"))
    with pytest.raises(RuntimeError):
        await first
    assert await second == "b"
