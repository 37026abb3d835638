"""Helpers for the wake tests: a subscriber that records what it heard, and the wake's logs."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from ujobs.clock import SYSTEM_CLOCK
from ujobs.wake.announce import RedisAnnouncer, redis_announcer
from ujobs.wake.listener import ChannelWake, redis_wake

WAIT_S = 10.0


class Heard:
    """A wake callback that records every payload and lets a test wait for one."""

    def __init__(self) -> None:
        self.payloads: list[str] = []
        self._changed = asyncio.Event()

    def __call__(self, payload: str) -> None:
        self.payloads.append(payload)
        self._changed.set()

    async def until(self, payload: str, timeout_s: float = WAIT_S) -> None:
        async def watch() -> None:
            while payload not in self.payloads:
                self._changed.clear()
                await self._changed.wait()

        await asyncio.wait_for(watch(), timeout_s)

    def count(self, payload: str) -> int:
        return self.payloads.count(payload)


def wake_logs(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "ujobs.wake" and r.getMessage() == event]


def is_live(wake: ChannelWake) -> bool:
    """``wake.live`` read afresh: ``start()`` and ``stop()`` flip it, which a type checker that
    narrowed it on an earlier ``assert wake.live is False`` cannot see."""
    return wake.live


@asynccontextmanager
async def heard_on_redis(
    redis_url: str, channel: str
) -> AsyncIterator[tuple[Heard, RedisAnnouncer]]:
    """A live Redis wake on ``channel`` recording what it hears, and an announcer publishing
    there; both closed on exit."""
    heard = Heard()
    wake = redis_wake(redis_url, channel)
    wake.subscribe(heard)
    await wake.start()
    announcer = redis_announcer(redis_url, channel, clock=SYSTEM_CLOCK)
    try:
        await wake.signals.wait("live", timeout_s=WAIT_S)
        yield heard, announcer
    finally:
        await announcer.close()
        await wake.stop()
