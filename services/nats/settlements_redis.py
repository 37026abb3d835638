"""The settlements relay of a Redis-only deployment: the stream ``{prefix}:settled`` (written
by the Redis driver's ending scripts with ``UJOBS_NATS_SETTLEMENTS=on``) out to
``UJOBS_SETTLED``, message for message what the Postgres relay (``settlements``) publishes:
the same body, subject and ``Nats-Msg-Id`` (``<job id>:<attempt>:<outcome>:<seq>``, ``seq``
the entry's stream id).

A pass reads the oldest ``batch`` entries in stream order and publishes them as the Postgres
relay does (``publish_waves``: waves in which no job appears twice, each wave's publishes
sent together with ``publish_async`` and their acks awaited together); the first failed
publish stops the pass, and only the entries whose publish JetStream acked are deleted
(``XDEL``), so the rest, and every later settlement of their jobs, go out on the next pass
in order. NATS away: nothing is
deleted, the entries wait in Redis (as durable as the Redis: with AOF, through a restart).

Redis has no ``for update skip locked``: two api replicas relaying one deployment both
publish the head of the stream. The stream's duplicate window (``Nats-Msg-Id``) drops the
second copy, and a job's order holds (a replica publishes an entry only after its earlier
entries were acked, by it or as duplicates of another's), at the cost of the doubled
publishes. That holds while a pass ends within the duplicate window (10 minutes): a replica
stalled longer between reading the head and publishing it re-publishes entries the other
already sent, so a consumer can see an old settlement again after a job's later one (a late
copy, never a loss or a reordering of first copies; a consumer keeps the highest ``attempt``
per job). The Postgres relay has no such case: one relay holds the rows and the lock at a
time. The entries are deleted as they are published, so nothing is purged later.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import TYPE_CHECKING

from nats.js import JetStreamContext

from services.nats.names import NatsNames
from services.nats.settlements import (
    DEFAULT_BATCH,
    IDLE_S,
    PUBLISH_TIMEOUT_S,
    RETRY_S,
    publish_waves,
)

if TYPE_CHECKING:  # a Postgres deployment never loads the redis client
    from shared.drivers.redis.settlements import RedisSettlementsOutbox

log = logging.getLogger("ujobs.nats")


class RedisSettlementsRelay:
    """``start()`` / ``stop()`` (both safe twice) run the loop; ``run_once()`` relays one
    batch and answers how many entries it published (tests)."""

    def __init__(
        self,
        outbox: RedisSettlementsOutbox,
        js: JetStreamContext,
        names: NatsNames,
        *,
        batch: int = DEFAULT_BATCH,
        retry_s: float = RETRY_S,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
    ) -> None:
        self.outbox = outbox
        self.js = js
        self.names = names
        self.batch = batch
        self.retry_s = retry_s
        self.publish_timeout_s = publish_timeout_s
        self.published = 0
        self.failures = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def run_once(self) -> int:
        rows = await self.outbox.oldest(self.batch)
        if not rows:
            return 0
        done, failure = await publish_waves(self.js, self.names, rows, self.publish_timeout_s)
        await self.outbox.forget(done)
        self.published += len(done)
        if failure is not None:
            raise failure
        return len(done)

    async def _run(self) -> None:
        while not self._stopping.is_set():
            pause = 0.0
            try:
                if await self.run_once() == 0:
                    pause = IDLE_S
            except Exception as exc:
                # NATS or Redis away: the entries stay in the stream; try again shortly.
                self.failures += 1
                log.warning("ujobs.nats.settlements-retry", extra={"error": exc})
                pause = self.retry_s
            if pause:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pause)


__all__ = ["RedisSettlementsRelay"]
