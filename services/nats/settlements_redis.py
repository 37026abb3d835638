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

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

from nats.js import JetStreamContext

from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.settlements import (
    DEFAULT_BATCH,
    IDLE_S,
    PUBLISH_TIMEOUT_S,
    RETRY_S,
    RelayLoop,
    publish_waves,
)

if TYPE_CHECKING:  # a Postgres deployment never loads the redis client
    from ujobs.drivers.redis.settlements import RedisSettlementsOutbox


class RedisSettlementsRelay(RelayLoop):
    """``run_once()`` relays one batch of the Redis stream and answers how many entries it
    published (tests); an empty pass waits ``IDLE_S``."""

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
        super().__init__(
            js, names, batch=batch, retry_s=retry_s, publish_timeout_s=publish_timeout_s
        )
        self.outbox = outbox

    def idle(self) -> Iterator[float]:
        return itertools.repeat(IDLE_S)

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


__all__ = ["RedisSettlementsRelay"]
