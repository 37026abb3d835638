"""The Redis driver: the queue off the database, one Lua script per operation.

``redis_driver()`` puts the core operations of ``JobDriver`` on Redis (redis-py asyncio). Each
operation is ONE script (``shared/drivers/redis/lua/``, see ``scripts``), so it is atomic
on the server, as a statement is in Postgres, and one round trip. Every key of a deployment
starts with the hash tag ``{<prefix>}``, so all of them live in one Redis Cluster slot and the
scripts run on a cluster unchanged. Time comes from the driver's clock and is handed to every
script as ``now`` (never Redis ``TIME``), so a ``FrozenClock`` moves it in tests.

What it does not carry, by design: ``introspect`` (the operator surface needs an index of
every row, by every filter; Redis keeps none), ``backfills``, ``leases`` and the worker
registry. Those properties answer None; ``require_introspection()`` turns that into
``X_NOT_IMPLEMENTED`` naming the Postgres driver, and a job declaring ``concurrency`` cannot run
on it.

The wake (``wake_channel=``, off by default): the enqueue script itself PUBLISHes the queue
name on the wake channel when it inserted a row due within ``WAKE_DUE_WITHIN_MS``, at most
once per queue per ``wake_slot_ms`` (10 ms) slot of the driver's clock, fleet-wide (the last
announced slot is a key of the deployment). A worker hears it while the enqueuer is still
reading its reply, and the enqueue costs no second command. A deployment on this driver then
wraps it with ``announcing(driver)`` and NO announcer (this process's loops still hear every
enqueue at once), and the workers subscribe with ``redis_wake(url, channel)`` as usual.

Batching (``batch``): the calls issued in one turn of the event loop leave as one
pipeline, and the acks (and the lease renewals) of one turn as one script call, each row
under its own fence. A worker's settles and its next claim therefore cost a round trip per
turn, not one per job; a call alone in its turn (a single enqueue, an idle worker's claim: the
pickup-latency path) is sent from its caller's own task, one loop turn after the call.

Keyspace loss: every claim reads the deployment's mark (``{prefix}:store``, see
``redis_mark.py``) and stamps its rows with it, so a Redis that came back empty (restarted
without persistence) is told from a lost lease: ``store_watch`` (``ujobs.drivers.keyspace``).

Settlements (``settlements=True``, the NATS edge's outbox, as the Postgres driver's): the
script that ends a run — an ack, a nack that ends an attempt, a claim burying a lapsed final
attempt — also adds one entry to the stream ``{prefix}:settled`` in the same script, so an
ending and its settlement are one atomic step. ``settlements`` (``RedisSettlementsOutbox``)
reads and forgets them for the api's relay.

Steps: a ``run_id`` is a namespace of its tenant; a run's steps hash is keyed by the row's
tenant and run id (``steps_key`` in ``prelude.lua``).

Retention: a ``done`` row and its steps expire ``done_ttl_ms`` after the ack (Redis drops them,
no sweep; ``0`` keeps them); ``dead`` and ``failed`` rows are kept. Its ids stop deduping an
enqueue once expired. A run enqueued with ``unique_for`` is kept for the longer of
``done_ttl_ms`` and its period (``ack.lua``), so the run its key's marker answers stays
readable while the marker answers it, as the retention sweep keeps it on Postgres.

This module is imported only when asked for (``ujobs.drivers.redis_driver`` is lazy), and no
other module in ``shared`` imports redis: a Postgres deployment never loads it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Iterable
from contextlib import AbstractAsyncContextManager
from typing import Any

from redis.asyncio import Redis, RedisCluster
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

import ujobs.drivers.redis.codec as codec
from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import (
    AHEAD_RETURNS_MAX,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    CounterBucket,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    HeartbeatResult,
    JobRow,
    NackOptions,
    StepRecord,
    check_enqueue_request,
    nack_counter,
    nack_state,
)
from ujobs.drivers.fairness import DEFAULT_WEIGHT, check_tenant, check_weight
from ujobs.drivers.redis.batch import ScriptBatcher
from ujobs.drivers.redis.mark import KeyspaceMark
from ujobs.drivers.redis.scripts import SCRIPTS
from ujobs.drivers.results import SettleTicket, SettleWaits, registered
from ujobs.errors import (
    ClaimQueuesEmptyError,
    ConfigInvalidError,
    DriverUnavailableError,
    DriverUnreachableError,
    InvariantError,
)
from ujobs.ids import new_id
from ujobs.wake.protocol import REDIS_WAKE_SLOT_MS, WAKE_DUE_WITHIN_MS

log = logging.getLogger("ujobs.results")

JSONValue = Any
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_PREFIX = "ujobs"
DEFAULT_DONE_TTL_MS = 7 * 86_400_000
DEFAULT_WAKE_SLOT_MS = REDIS_WAKE_SLOT_MS
"""The announce slot on the Redis channel, the same as every Redis announcer's
(``ujobs.wake.protocol.REDIS_WAKE_SLOT_MS``: a PUBLISH per queue per 10 ms at most; a Postgres
NOTIFY serialises commits, a PUBLISH does not)."""
_HEARTBEAT_RESULTS: dict[str, HeartbeatResult] = {
    "renewed": "renewed",
    "cancelled": "cancelled",
    "lost": "lost",
}


class RedisResults:
    """The Redis driver's result waits: ``result_watch.lua`` reads (and marks) the row's hash;
    ONE pub/sub subscription to ``{prefix}:results`` per driver, held while any wait is open."""

    def __init__(self, driver: RedisDriver) -> None:
        self._driver = driver
        self._waits = SettleWaits()
        self._pubsub: Any = None
        self._reader: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()

    @property
    def channel(self) -> str:
        return f"{self._driver.hash_tag}:results"

    async def read(self, job_id: str) -> JobRow | None:
        return codec.job_row_from(await self._driver._run("result_watch", [job_id, 0]))

    async def watch(self, job_id: str) -> JobRow | None:
        return codec.job_row_from(await self._driver._run("result_watch", [job_id, 1]))

    def listen(self, job_id: str) -> AbstractAsyncContextManager[SettleTicket]:
        return registered(self._waits, job_id, session=self._listening, close=self._stop)

    async def _listening(self) -> None:
        if self._reader is not None and not self._reader.done():
            return
        async with self._lock:
            if self._reader is not None and not self._reader.done():
                return
            try:
                pubsub = self._driver.client.pubsub()
                await pubsub.subscribe(self.channel)
            except RedisError as exc:
                raise _unavailable("result_watch", exc) from exc
            self._pubsub = pubsub
            self._reader = asyncio.create_task(self._read(pubsub))

    async def _read(self, pubsub: Any) -> None:
        try:
            while True:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=None)
                if message is not None and message.get("type") == "message":
                    self._waits.heard(codec.text(message["data"]))
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.info("ujobs.results.session-lost", extra={"error": repr(exc)})
            self._waits.ring_all()

    async def _stop(self) -> None:
        async with self._lock:
            if len(self._waits):
                return
            reader, self._reader = self._reader, None
            pubsub, self._pubsub = self._pubsub, None
            if reader is not None:
                reader.cancel()
                with contextlib.suppress(BaseException):
                    await reader
            if pubsub is not None:
                with contextlib.suppress(Exception):
                    await pubsub.aclose()


class RedisWeights:
    """``TenantWeights`` in the hash ``{prefix}:tw`` that claim.lua reads on every claim."""

    def __init__(self, client: Redis | RedisCluster, hash_tag: str) -> None:
        self._client = client
        self._key = f"{hash_tag}:tw"

    async def weight(self, tenant_id: str) -> int:
        tenant = check_tenant(tenant_id)
        try:
            stored = await self._client.hget(self._key, tenant)
        except RedisError as exc:
            raise _unavailable("weight", exc) from exc
        return DEFAULT_WEIGHT if stored is None else int(stored)

    async def set_weight(self, tenant_id: str, weight: int) -> int:
        tenant, checked = check_tenant(tenant_id), check_weight(weight)
        try:
            await self._client.hset(self._key, tenant, str(checked))
        except RedisError as exc:
            raise _unavailable("set_weight", exc) from exc
        return checked


class RedisDriver:
    """The core ``JobDriver`` operations over one Redis (or one Redis Cluster slot)."""

    name = "redis"

    def __init__(
        self,
        client: Redis | RedisCluster,
        *,
        prefix: str = DEFAULT_PREFIX,
        clock: Clock = SYSTEM_CLOCK,
        done_ttl_ms: int = DEFAULT_DONE_TTL_MS,
        owns_client: bool = False,
        wake_channel: str | None = None,
        wake_slot_ms: int = DEFAULT_WAKE_SLOT_MS,
        settlements: bool = False,
    ) -> None:
        if not prefix or "{" in prefix or "}" in prefix:
            raise ConfigInvalidError(
                "prefix must be a non-empty string without '{' or '}' (it becomes the hash tag "
                f"'{{prefix}}' every key starts with); got {prefix!r}",
                meta={"option": "prefix"},
            )
        if isinstance(done_ttl_ms, bool) or not isinstance(done_ttl_ms, int) or done_ttl_ms < 0:
            raise ConfigInvalidError(
                "done_ttl_ms must be a whole number of milliseconds, 0 to keep done rows; "
                f"got {done_ttl_ms!r}",
                meta={"option": "done_ttl_ms"},
            )
        if wake_channel is not None and (not isinstance(wake_channel, str) or not wake_channel):
            raise ConfigInvalidError(
                f"wake_channel must be a channel name or None; got {wake_channel!r}",
                meta={"option": "wake_channel"},
            )
        if isinstance(wake_slot_ms, bool) or not isinstance(wake_slot_ms, int) or wake_slot_ms < 1:
            raise ConfigInvalidError(
                f"wake_slot_ms must be a whole number of milliseconds, at least 1; got "
                f"{wake_slot_ms!r}",
                meta={"option": "wake_slot_ms"},
            )
        self.clock = clock
        self.client = client
        self.wake_channel = wake_channel
        self._wake = (
            (wake_channel, wake_slot_ms, WAKE_DUE_WITHIN_MS) if wake_channel is not None else None
        )
        self.prefix = prefix
        self.done_ttl_ms = done_ttl_ms
        self.settlements = settlements
        self._settle_flag = 1 if settlements else 0
        self.hash_tag = f"{{{prefix}}}"
        self._keys = [self.hash_tag]
        self._owns_client = owns_client
        # One pipeline per event-loop turn on a single node (see redis_batch.py).
        self._batcher = (
            ScriptBatcher(client, self._keys) if not isinstance(client, RedisCluster) else None
        )
        self._mark = KeyspaceMark(self._run, prefix)
        self._results = RedisResults(self)
        self._weights = RedisWeights(client, self.hash_tag)

    # -- capabilities: none beyond the core operations (see the module docstring) ---------
    @property
    def introspect(self) -> None:
        return None

    @property
    def leases(self) -> None:
        return None

    @property
    def workers(self) -> None:
        return None

    @property
    def backfills(self) -> None:
        return None

    @property
    def weights(self) -> RedisWeights:
        """Tenant weights for the fair claim (``ujobs.drivers.fairness``)."""
        return self._weights

    @property
    def store_watch(self) -> KeyspaceMark:
        """The keyspace mark: a Redis that came back empty is told from a lost lease."""
        return self._mark

    @property
    def results(self) -> RedisResults:
        """Result waits (``ujobs.drivers.results``): the row's hash read with its result, woken
        through the ``{prefix}:results`` channel."""
        return self._results

    async def _run(self, operation: str, args: list[Any]) -> Any:
        """One script; a Redis failure leaves the driver as ``X_DRIVER_UNAVAILABLE``."""
        try:
            if self._batcher is not None:
                return await self._batcher.run(SCRIPTS[operation], args)
            return await SCRIPTS[operation](self.client, self._keys, args)
        except RedisError as exc:
            raise _unavailable(operation, exc) from exc

    async def _row(self, operation: str, head: list[Any], row: list[Any]) -> Any:
        """One row of a row-taking script (``ack``, ``heartbeat``): merged with the rows of the
        same turn into one call (``batch``); answers this row's element."""
        try:
            if self._batcher is not None:
                return await self._batcher.call_rows(SCRIPTS[operation], head, row)
            return (await SCRIPTS[operation](self.client, self._keys, [*head, *row]))[0]
        except RedisError as exc:
            raise _unavailable(operation, exc) from exc

    # -- enqueue ------------------------------------------------------------------------
    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return (await self.enqueue_many([request]))[0]

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        requests = list(requests)  # one script call: the whole batch goes at once
        if not requests:
            return []
        for request in requests:
            check_enqueue_request(request)
        minted = [(r, r.id or new_id(), r.run_id or new_id()) for r in requests]
        args = codec.enqueue_args(self.clock.now_ms(), minted, self._wake)
        reply = await self._run("enqueue", args)
        return codec.enqueued_from(reply)

    # -- claim --------------------------------------------------------------------------
    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]:
        if not options.queues:
            raise ClaimQueuesEmptyError("claim needs at least one queue")
        if options.limit < 1 or options.visibility_ms < 1:
            raise InvariantError("claim limit and visibility_ms must be at least 1")
        drop = sorted(options.drop_exhausted)
        strict = sorted(options.strict_queues)
        queues = list(dict.fromkeys(options.queues))
        args: list[Any] = [
            self.clock.now_ms(),
            options.limit,
            options.worker_id,
            options.visibility_ms,
            self._mark.candidate(),
            -1 if options.ahead_after is None else options.ahead_after,
            AHEAD_RETURNS_MAX,
            self._settle_flag,
            len(drop),
            *drop,
            len(strict),
            *strict,
            *queues,
        ]
        claimed, buried, mark = await self._run("claim", args)
        epoch = self._mark.seen(mark)
        if buried and options.on_exhausted is not None:
            await options.on_exhausted([codec.exhausted_from(row) for row in buried])
        return [codec.claimed_from(row, epoch) for row in claimed]

    # -- settle -------------------------------------------------------------------------
    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,  # no lease store here (``leases`` is None): never handed one
    ) -> bool:
        duration = None if duration_ms is None else max(0, int(duration_ms))
        row = [
            job_id,
            ref.worker_id,
            ref.claim,
            self.clock.now_ms(),
            codec.opt_arg(duration),
            codec.opt_arg(result),
        ]
        return bool(await self._row("ack", [self.done_ttl_ms, self._settle_flag], row))

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        duration = None if options.duration_ms is None else max(0, int(options.duration_ms))
        args = [
            job_id,
            ref.worker_id,
            ref.claim,
            self.clock.now_ms(),
            nack_state(options),
            1 if options.count else 0,
            codec.opt_arg(options.error),
            codec.opt_arg(options.run_at_ms),
            codec.opt_arg(nack_counter(options)),
            codec.opt_arg(duration),
            codec.opt_arg(options.unreachable_cap),
            self._settle_flag,
            1 if options.snooze else 0,
        ]
        return bool(await self._run("nack", args))

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        return bool(int(await self._row("start_ahead", [], [job_id, ref.worker_id, ref.claim])))

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        if visibility_ms < 1:
            raise InvariantError("visibility_ms must be at least 1")
        row = [job_id, ref.worker_id, ref.claim, self.clock.now_ms(), visibility_ms]
        answer = codec.text(await self._row("heartbeat", [], row))
        return _HEARTBEAT_RESULTS[answer]

    # -- steps --------------------------------------------------------------------------
    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        reply = await self._run("load_steps", [run_id, codec.opt_arg(tenant_id)])
        return codec.steps_from(reply)

    async def save_step(
        self,
        job_id: str,
        ref: ClaimRef,
        run_id: str,
        name: str,
        output: JSONValue,
        *,
        started_at_ms: int,
    ) -> bool:
        args = [
            job_id,
            ref.worker_id,
            ref.claim,
            run_id,
            name,
            codec.dump_json(output),
            int(started_at_ms),
            self.clock.now_ms(),
        ]
        return bool(await self._run("save_step", args))

    # -- reads --------------------------------------------------------------------------
    async def stats(self) -> DriverStats:
        reply = await self._run("stats", [self.clock.now_ms(), self.done_ttl_ms])
        queues = [codec.queue_stats_from(entry) for entry in reply]
        return DriverStats(queues={q.queue: q for q in sorted(queues, key=lambda q: q.queue)})

    async def counter_buckets(self, job: str, since_ms: int) -> list[CounterBucket]:
        """The 1-minute counter buckets of ``job`` from ``since_ms`` (at most a day back).

        Not part of ``JobDriver``: the operator reads counters through ``introspect``, which
        this driver has not. Here so a person (or a test) can see what the settles counted.
        """
        reply = await self._run("counters", [job, since_ms, self.clock.now_ms()])
        return codec.buckets_from(job, reply)

    async def close(self) -> None:
        """Close the client if this driver opened it; a caller's own client stays open."""
        if self._owns_client:
            await self.client.aclose()


def _unavailable(operation: str, exc: RedisError) -> DriverUnavailableError:
    """A Redis failure as it leaves the driver: a connection that could not be made or was
    lost (a restart, a failover, a timeout) is ``X_DRIVER_UNREACHABLE`` — the worker sends a
    settle again and hands the attempt back uncounted — and anything Redis ANSWERED (a script
    error, out of memory) stays ``X_DRIVER_UNAVAILABLE``."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return DriverUnreachableError(
            f"the Redis driver's {operation} could not reach Redis ({type(exc).__name__}: "
            f"{exc}); try again once Redis at REDIS_URL answers",
            meta={"driver": "redis", "operation": operation, "cause": type(exc).__name__},
        )
    return DriverUnavailableError(
        f"the Redis driver's {operation} failed: {exc}; check that Redis at REDIS_URL "
        "answers and has memory to spare",
        meta={"driver": "redis", "operation": operation},
    )


def redis_driver(
    client: Redis | RedisCluster | None = None,
    *,
    prefix: str = DEFAULT_PREFIX,
    clock: Clock = SYSTEM_CLOCK,
    done_ttl_ms: int = DEFAULT_DONE_TTL_MS,
    wake_channel: str | None = None,
    wake_slot_ms: int = DEFAULT_WAKE_SLOT_MS,
    settlements: bool = False,
) -> RedisDriver:
    """A Redis driver; with no ``client``, one to ``REDIS_URL`` (default the local Redis).
    ``wake_channel`` (e.g. ``ujobs.wake.listener.REDIS_WAKE_CHANNEL``) makes every enqueue announce
    its queue from inside the script; ``settlements`` writes the settlements outbox in every
    ending's script (see the module docstring)."""
    owns = client is None
    if client is None:
        client = Redis.from_url(os.environ.get("REDIS_URL", DEFAULT_REDIS_URL))
    return RedisDriver(
        client,
        prefix=prefix,
        clock=clock,
        done_ttl_ms=done_ttl_ms,
        owns_client=owns,
        wake_channel=wake_channel,
        wake_slot_ms=wake_slot_ms,
        settlements=settlements,
    )


__all__ = ["DEFAULT_DONE_TTL_MS", "DEFAULT_WAKE_SLOT_MS", "RedisDriver", "redis_driver"]
