"""The announcing side of the wake: after an enqueue, tell this process's loops at once and
other processes through the Redis channel.

``announcing(driver, announcer)`` wraps any ``JobDriver`` one layer above the drivers (the
drivers stay ignorant of Redis). After an ``enqueue`` / ``enqueue_many`` that created a row due
within ``WAKE_DUE_WITHIN_MS`` — never for a deduped key, never for a row due later — it:

1. calls ``signal_enqueued(queue)``: this process's workers pass now, no network hop, no
   throttle (a direct enqueue, the relay's publish and the scheduler's fire all come through
   here, since they all enqueue through the process's driver);
2. hands the queue to the announcer, which publishes it on ``ujobs:wake`` at most once per
   queue per ``REDIS_WAKE_SLOT_MS`` (10 ms) slot of THIS process's clock (a ``PUBLISH`` holds
   no commit lock, unlike the 250 ms-throttled ``NOTIFY``; see ``ujobs.wake.protocol``). The
   pass a wake causes finds the rows its slot kept silent too; the rest start on the woken
   loop's next pass.

A result wait that finds its row due announces its queue, unthrottled
(``ujobs.wake.announce_results``: the wait's mark can make a claim skip the row). So does a
parent its last child's settle made due (``ujobs.drivers.children.WakesParents``: the
wrapper registers the publish with the Postgres driver, which tells this process itself).

The operator calls that make rows due — ``requeue``, ``promote``, ``requeue_many`` /
``promote_many`` with a ``queue`` filter, ``resume_queue`` — announce through the wrapped
``introspect`` too, unthrottled (they are rare, and the spec has them never stay silent).
A bulk move with no ``queue`` filter cannot name its queues (``BulkResult`` carries counts
only): it is announced by the Postgres driver's own ``pg_notify`` for LISTEN workers, and
otherwise starts on the poll.

The Postgres driver's statements also ``pg_notify('x_jobs_wake', queue)``, throttled in SQL.
That stays on when Redis carries the wake: throttled to four per second per queue, its
commit-serialising cost is negligible, and it keeps a LISTEN worker in a mixed fleet awake.

A publish never blocks or fails an enqueue: it runs in the background, and a Redis outage is
logged once (``jobs.wake.announce-failed``) until a publish lands again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Protocol

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import (
    Enqueued,
    EnqueueRequest,
    JobDriver,
    JobIntrospection,
    announces_enqueues,
)
from ujobs.drivers.children import WakesParents
from ujobs.drivers.delegating import DelegatingDriver
from ujobs.drivers.request_rows import RequestRows
from ujobs.drivers.results import JobResults, results_of
from ujobs.errors import ConfigInvalidError
from ujobs.loop_probes import Signals
from ujobs.wake.announce_introspect import AnnouncingIntrospection
from ujobs.wake.announce_results import AnnouncingResults
from ujobs.wake.listener import REDIS_WAKE_CHANNEL
from ujobs.wake.local import signal_enqueued
from ujobs.wake.protocol import REDIS_WAKE_SLOT_MS, WAKE_DUE_WITHIN_MS, WAKE_SLOT_MS

if TYPE_CHECKING:
    import redis.asyncio as aioredis

log = logging.getLogger("ujobs.wake")


class WakeAnnouncer(Protocol):
    def announce(self, queue: str, *, throttled: bool = True) -> None:
        """Publish ``queue`` to other processes; ``throttled`` applies the per-slot limit."""
        ...

    async def close(self) -> None: ...


class SlotThrottle:
    """At most one admission per key per ``slot_ms`` slot of ``clock`` (slots are aligned to
    the epoch, as the SQL throttle's are)."""

    def __init__(self, clock: Clock = SYSTEM_CLOCK, slot_ms: int = WAKE_SLOT_MS) -> None:
        self.clock = clock
        self.slot_ms = slot_ms
        self._last: dict[str, int] = {}

    def admit(self, key: str) -> bool:
        slot = self.clock.now_ms() // self.slot_ms
        last = self._last.get(key)
        if last is not None and last >= slot:
            return False
        self._last[key] = slot
        return True


class RedisAnnouncer:
    """Publishes queue names on the Redis wake channel, throttled per queue per slot."""

    def __init__(
        self,
        client_or_url: aioredis.Redis | str,
        channel: str = REDIS_WAKE_CHANNEL,
        *,
        clock: Clock = SYSTEM_CLOCK,
        slot_ms: int = REDIS_WAKE_SLOT_MS,
    ) -> None:
        import redis.asyncio as aioredis

        if isinstance(client_or_url, str):
            self._client = aioredis.Redis.from_url(client_or_url, socket_connect_timeout=5.0)
            self._owns = True
        else:
            self._client = client_or_url
            self._owns = False
        self.channel = channel
        self.throttle = SlotThrottle(clock, slot_ms)
        self.signals = Signals()
        self._pending: set[asyncio.Task[None]] = set()
        self._failing = False
        self._closed = False

    def announce(self, queue: str, *, throttled: bool = True) -> None:
        if self._closed:
            return
        if throttled and not self.throttle.admit(queue):
            self.signals.emit("throttled", queue)
            return
        task = asyncio.ensure_future(self._publish(queue))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    async def _publish(self, queue: str) -> None:
        try:
            await self._client.publish(self.channel, queue)
        except Exception as exc:
            if not self._failing:
                self._failing = True
                log.warning(
                    "jobs.wake.announce-failed",
                    extra={
                        "channel": self.channel,
                        "error": repr(exc),
                        "fix": "jobs still start on the poll (within 2 s); check REDIS_URL",
                    },
                )
            self.signals.emit("failed", queue)
            return
        self._failing = False
        self.signals.emit("announced", queue)

    async def flush(self) -> None:
        """Wait for every publish started so far."""
        while self._pending:
            await asyncio.gather(*list(self._pending), return_exceptions=True)

    async def close(self) -> None:
        """Finish the publishes in flight, then close a client built here; safe twice."""
        if self._closed:
            return
        self._closed = True
        await self.flush()
        if self._owns:
            await self._client.aclose()


def redis_announcer(
    client_or_url: aioredis.Redis | str,
    channel: str = REDIS_WAKE_CHANNEL,
    *,
    clock: Clock = SYSTEM_CLOCK,
    slot_ms: int = REDIS_WAKE_SLOT_MS,
) -> RedisAnnouncer:
    return RedisAnnouncer(client_or_url, channel, clock=clock, slot_ms=slot_ms)


class AnnouncingDriver(DelegatingDriver):
    """A ``JobDriver`` that delegates everything to ``inner`` and announces what became due:
    it overrides the two enqueues, the operator surface and the result waits' watch, nothing
    else."""

    def __init__(self, inner: JobDriver, announcer: WakeAnnouncer | None) -> None:
        super().__init__(inner)
        self.announcer = announcer
        inner_introspect = inner.introspect
        self._introspect = (
            AnnouncingIntrospection(inner_introspect, self.announce)
            if inner_introspect is not None
            else None
        )
        # The driver tells this process's workers itself (ujobs.drivers.postgres.results):
        # the wrapper adds only the publish to other processes, when there is an announcer.
        # A parent its last child's settle made due: the driver tells this process itself; the
        # publish reaches a worker elsewhere that serves the parent's queue (unthrottled, as a
        # result wait's: one wake per gather, never a burst).
        if announcer is not None and isinstance(inner, WakesParents):
            inner.on_parent_woken(partial(announcer.announce, throttled=False))
        inner_results = results_of(inner)
        self._results = (
            AnnouncingResults(inner_results, announcer.announce, inner.clock)
            if inner_results is not None and announcer is not None
            else inner_results
        )

    def announce(self, queue: str, *, throttled: bool = True) -> None:
        """This process at once; other processes through the announcer."""
        signal_enqueued(queue)
        if self.announcer is not None:
            self.announcer.announce(queue, throttled=throttled)

    def _due_by(self) -> int:
        """A row whose ``run_at_ms`` is at most this is due soon enough to announce."""
        return self.inner.clock.now_ms() + WAKE_DUE_WITHIN_MS

    @staticmethod
    def _announces(request: EnqueueRequest, answer: Enqueued, due_by: int) -> bool:
        """A row this enqueue inserted (not deduped) that is due by ``due_by``."""
        if answer.deduped:
            return False
        if request.debounce_ms is not None and request.debounce_ms > WAKE_DUE_WITHIN_MS:
            return False  # due a debounce from now: the poll finds it
        return request.run_at_ms is None or request.run_at_ms <= due_by

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        answer = await self.inner.enqueue(request)
        if self._announces(request, answer, self._due_by()):
            self.announce(request.queue)
        return answer

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        if isinstance(requests, RequestRows):
            return await self._enqueue_rows(requests)
        kept = _Kept(requests)  # the inner driver may read a generator as it goes
        answers = await self.inner.enqueue_many(kept)
        due_by = self._due_by()  # one clock read for the batch
        announces = self._announces
        queues: dict[str, None] = {}
        for request, answer in zip(kept.seen, answers, strict=True):
            # Each queue asked once: the rest of a batch mostly shares the first's queue.
            if request.queue not in queues and announces(request, answer, due_by):
                queues[request.queue] = None
        for queue in queues:
            self.announce(queue)
        return answers

    async def _enqueue_rows(self, rows: RequestRows) -> list[Enqueued]:
        """``enqueue_many`` of one job's batch: its requests share their queue and controls,
        so the queue is announced when any row inserted is due, read from the rows' due
        times (``rows.run_ats``) or the one they share, with no request kept per row."""
        answers = await self.inner.enqueue_many(rows)
        shared = rows.shared
        if shared is None or (
            shared.debounce_ms is not None and shared.debounce_ms > WAKE_DUE_WITHIN_MS
        ):
            return answers  # nothing read, or due a debounce from now: the poll finds them
        due_by = self._due_by()
        run_ats = rows.run_ats
        for index, answer in enumerate(answers):
            if not answer.deduped:
                at = shared.run_at_ms if run_ats is None else run_ats[index]
                if at is None or at <= due_by:
                    self.announce(shared.queue)
                    break
        return answers

    @property
    def introspect(self) -> JobIntrospection | None:
        return self._introspect

    @property
    def results(self) -> JobResults | None:
        return self._results


class _Kept:
    """A one-pass iterable of requests that keeps each one as it is read, so the batch's
    answers can be paired with their requests after the inner driver streamed them."""

    def __init__(self, source: Iterable[EnqueueRequest]) -> None:
        self._source = source
        self.seen: list[EnqueueRequest] = []

    def __iter__(self) -> Iterator[EnqueueRequest]:
        for request in self._source:
            self.seen.append(request)
            yield request


def announcing(driver: JobDriver, announcer: WakeAnnouncer | None = None) -> AnnouncingDriver:
    """``driver`` with its enqueues announced: in this process always, to other processes when
    an ``announcer`` (``redis_announcer(url)``) is given. Wrap once, at boot, and install the
    result with ``set_job_driver``; with the Postgres LISTEN wake pass no announcer (the
    driver's SQL announces)."""
    if announces_enqueues(driver):
        raise ConfigInvalidError(
            "this driver already announces; wrap the inner driver once",
            meta={"driver": driver.name},
        )
    return AnnouncingDriver(driver, announcer)
