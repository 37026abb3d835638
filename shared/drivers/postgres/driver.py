"""The Postgres driver: the queue in ``x_jobs``, every statement a named file in ``sql/queries``.

Time: every time-sensitive statement takes ``now`` from the driver's ``clock`` as a parameter
(epoch ms), so a test on a ``FrozenClock`` moves the real database's notion of "due" and
"lapsed" without sleeping. Only the event bus reads the database clock.

JSON crosses as text (see ``rows``), so the caller's pool needs no codec setup; the
driver never closes that pool (``close()`` only waits for settles in flight).

Throughput: a claim takes up to ``limit`` rows in one statement; acks that arrive while one is
in flight are sent together (``settle_batch``); ``enqueue_many`` is one statement for N jobs;
the hot statements — every core operation but ``stats`` — run on a few held connections
(``held_connections``), which also turn a connection-class failure into
``X_DRIVER_UNREACHABLE`` and never reuse a connection that saw one. Build the pool with
``postgres_pool()`` (no reset round trip per release, generic plans); any asyncpg pool works.
Enqueue lives in ``enqueue``; a statement Postgres picks as a deadlock victim is sent again
(``deadlock_retry``). The optional capabilities live beside this file: ``introspect`` (the
operator surface), ``leases`` (fleet slots), ``workers`` (the registry) and ``backfills`` (the
ledger).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import asyncpg

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.base import (
    AHEAD_RETURNS_MAX,
    ALL_STATES,
    ATTEMPT_ERROR_CHARS,
    ATTEMPT_ERRORS_KEPT,
    COUNTER_TIERS,
    ClaimedJob,
    ClaimOptions,
    ClaimRef,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    HeartbeatResult,
    NackOptions,
    QueueStats,
    StepRecord,
    nack_counter,
    nack_state,
    slot_holder,
)
from ujobs.drivers.postgres.backfills import PostgresBackfillLedger
from ujobs.drivers.postgres.children import PostgresChildren
from ujobs.drivers.postgres.deadlock_retry import retry_deadlock
from ujobs.drivers.postgres.enqueue import (
    WAKE_CHANNEL,
    WAKE_DUE_WITHIN_MS,
    WAKE_SLOT_MS,
    GuardedAnswers,
    PostgresEnqueuer,
    wake_slot,
)
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.introspect import PostgresIntrospection
from ujobs.drivers.postgres.leases import PostgresLeaseStore
from ujobs.drivers.postgres.progress import ProgressThrottle
from ujobs.drivers.postgres.results import PostgresResults
from ujobs.drivers.postgres.rows import claimed_job, dumps, exhausted_job, step_record
from ujobs.drivers.postgres.settle_batch import SettleBatcher
from ujobs.drivers.postgres.sql import query
from ujobs.drivers.postgres.weights import PostgresWeights
from ujobs.drivers.postgres.workers import PostgresWorkerRegistry
from ujobs.errors import ClaimQueuesEmptyError, InvariantError
from ujobs.execution.frozen_init import slot_init
from ujobs.wake.local import signal_enqueued

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
JSONValue = Any

_CLAIM = query("claim")
_CLAIM_SLOTS = query("claim_slots")
_ACK = query("ack")
_NACK = query("nack")
_START_AHEAD = query("start_ahead")
_SETTLEMENTS_ACK = query("settlements_ack")
_SETTLEMENTS_NACK = query("settlements_nack")
_HEARTBEAT = query("heartbeat")
_SAVE_STEP = query("save_step")
_LOAD_STEPS = query("load_steps")
_STATS = query("stats")
_PAUSED = query("paused")
_SCALER_DEPTH = query("scaler_depth")
# How far the queues read counts per queue (claimable, running) or per finished state before it
# answers "at least": the read's cost stays flat however big the backlog grows (stats.sql).
QUEUE_COUNT_CAP = 10_000

# Which named statements each JobDriver operation runs (tests/integration prove the map).
OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "enqueue": ("enqueue",),
    "enqueue_many": ("enqueue_many_copy", "enqueue_wake", "enqueue_many"),
    "claim": ("claim", "claim_slots"),
    "ack": ("ack", "settlements_ack"),
    "nack": ("nack", "settlements_nack"),
    "heartbeat": ("heartbeat",),
    "start_ahead": ("start_ahead",),
    "load_steps": ("load_steps",),
    "save_step": ("save_step",),
    "stats": ("stats", "paused"),
}


def counter_bucket(now_ms: int) -> tuple[int, int]:
    """``(width, start)`` of the 1-minute bucket a settle at ``now_ms`` counts in."""
    width = COUNTER_TIERS[0][0]
    return width, now_ms - now_ms % width


@slot_init  # one per ack: see ujobs.execution.frozen_init
@dataclass(frozen=True, slots=True, eq=False)
class _Ack:
    """One ack waiting for its batch. Compared and hashed by identity (``eq=False``): the
    batch answers each submitted item whether it landed, and a field-by-field hash built a
    tuple of every field twice an ack."""

    id: str
    worker_id: str
    claim: int
    duration_ms: int | None
    progress: str | None
    result: str | None = None
    slot: str | None = None


@slot_init  # one per row started from a claim-ahead buffer
@dataclass(frozen=True, slots=True, eq=False)
class _Start:
    """One start mark waiting for its batch; by identity, as ``_Ack``."""

    id: str
    worker_id: str
    claim: int


class PostgresDriver:
    """``JobDriver`` over an asyncpg pool. Build it with ``postgres_driver(pool)``.

    ``settlements=True`` (the NATS edge's settlements outbox, migration 0013): every ack, and
    every nack that ends an attempt, also inserts its ``x_settlements`` row in the same
    statement (``settlements_ack`` / ``settlements_nack``); off, ack and nack run the statements
    they always ran. The other endings write theirs in their own statement too: a claim that
    buries a lapsed final attempt (``claim``) and an operator's cancel (``introspect``)."""

    name = "postgres"

    def __init__(
        self, pool: Pool, *, clock: Clock = SYSTEM_CLOCK, settlements: bool = False
    ) -> None:
        self.pool = pool
        self.clock = clock
        self.settlements = settlements
        self._ack_sql = _SETTLEMENTS_ACK if settlements else _ACK
        self._nack_sql = _SETTLEMENTS_NACK if settlements else _NACK
        self.progress = ProgressThrottle(clock)
        self._acks: SettleBatcher[_Ack] = SettleBatcher(self._flush_acks)
        self._starts: SettleBatcher[_Start] = SettleBatcher(self._flush_starts)
        self._parent_wakes: list[Callable[[str], None]] = []
        self._conns = HeldConnections(pool)
        self._enqueuer = PostgresEnqueuer(self._conns, clock)
        self._introspect = PostgresIntrospection(
            pool, clock, self.progress, settlements=settlements
        )
        self._leases = PostgresLeaseStore(pool, clock)
        self._weights = PostgresWeights(pool)
        self._workers = PostgresWorkerRegistry(pool, clock)
        self._backfills = PostgresBackfillLedger(pool, clock)
        self._results = PostgresResults(pool, clock)
        self._children = PostgresChildren(self._conns, self._enqueuer)

    # -- capabilities ------------------------------------------------------------------------
    def stores_in(self, executor: object) -> bool:
        """Whether this driver's rows are in ``executor``'s ``x_jobs``: it is this pool."""
        return executor is self.pool

    @property
    def introspect(self) -> PostgresIntrospection:
        return self._introspect

    @property
    def leases(self) -> PostgresLeaseStore:
        return self._leases

    @property
    def weights(self) -> PostgresWeights:
        return self._weights

    @property
    def workers(self) -> PostgresWorkerRegistry:
        return self._workers

    @property
    def backfills(self) -> PostgresBackfillLedger:
        return self._backfills

    @property
    def store_watch(self) -> None:
        """None: this store never comes back empty under a live process."""
        return None

    @property
    def results(self) -> PostgresResults:
        """Result waits (``ujobs.drivers.results``)."""
        return self._results

    @property
    def children(self) -> PostgresChildren:
        """Children and the waits on them (``ujobs.drivers.children``)."""
        return self._children

    # -- enqueue -----------------------------------------------------------------------------
    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        return await self._enqueuer.enqueue(request)

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        """One statement for N jobs, each still deduped by its id and live key."""
        return await self._enqueuer.enqueue_many(requests)

    async def enqueue_many_new(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        """Every request as a new row, or none: a live key, a taken id or a repeat anywhere is
        ``X_JOB_DUPLICATE`` naming each (``meta.conflicts``). Not part of the driver contract:
        the api's ``/batch`` under ``onConflict: error``."""
        return await self._enqueuer.enqueue_many_new(requests)

    async def enqueue_while_live(self, request: EnqueueRequest, token_id: str) -> Enqueued | None:
        """``enqueue`` only while the api token ``token_id`` is live, checked in the insert's
        own statement; None (nothing inserted) when it is revoked or expired. Not part of the
        driver contract: the api's tokens live in this database only
        (``ujobs.services.api.tokens``)."""
        return await self._enqueuer.enqueue_while_live(request, token_id)

    async def enqueue_many_while_live(
        self, requests: Sequence[EnqueueRequest], tokens: Sequence[str | None]
    ) -> GuardedAnswers:
        """``enqueue_many`` of a group whose rows each need their api token (``tokens[i]``;
        None: no check) live, checked in the insert's own statement. Not part of the driver
        contract: the api's group commit."""
        return await self._enqueuer.enqueue_many_while_live(requests, tokens)

    # -- claim -------------------------------------------------------------------------------
    async def claim(self, options: ClaimOptions) -> list[ClaimedJob]:
        if not options.queues:
            raise ClaimQueuesEmptyError("claim needs at least one queue")
        if options.limit < 1 or options.visibility_ms < 1:
            raise InvariantError(
                "claim limit and visibility_ms must be at least 1",
                meta={"limit": options.limit, "visibility_ms": options.visibility_ms},
            )
        now = self.clock.now_ms()
        width, start = counter_bucket(now)
        # With fleet slots to take, the twin that takes them (claim_slots.sql, two more
        # parameters); the plain claim stays as lean as it was for every other worker.
        slots = options.slots
        extra = (
            ([n for n, _ in slots], [limit for _, limit in slots], sorted(options.slots_wait))
            if slots
            else ()
        )
        rows = await retry_deadlock(
            self._fetch,
            _CLAIM_SLOTS if slots else _CLAIM,
            list(dict.fromkeys(options.queues)),
            options.limit,
            options.worker_id,
            now,
            options.visibility_ms,
            sorted(options.drop_exhausted),
            width,
            start,
            options.ahead_after,
            AHEAD_RETURNS_MAX,
            self.settlements,
            sorted(options.strict_queues),
            *extra,
        )
        claimed = [claimed_job(r) for r in rows if r["kind"] == "claimed"]
        buried = [exhausted_job(r) for r in rows if r["kind"] == "buried"]
        if buried and options.on_exhausted is not None:
            await options.on_exhausted(buried)
        return claimed

    # -- settle ------------------------------------------------------------------------------
    async def ack(
        self,
        job_id: str,
        ref: ClaimRef,
        *,
        duration_ms: int | None = None,
        result: str | None = None,
        slot: str | None = None,
    ) -> bool:
        progress = self.progress.settle(job_id)
        item = _Ack(job_id, ref.worker_id, ref.claim, duration_ms, progress, result, slot)
        return await self._acks.submit(item)

    async def _flush_acks(self, items: Sequence[_Ack]) -> set[_Ack]:
        now = self.clock.now_ms()
        width, start = counter_bucket(now)
        # {id: {claim: {worker id: [duration, progress, result?]}}}: each row looks its own
        # fence up (sql/queries/ack.sql); two acks of one id under different claims both fit.
        batch: dict[str, dict[str, dict[str, list[Any]]]] = {}
        for i in items:
            fences = batch.setdefault(i.id, {}).setdefault(str(i.claim), {})
            if i.result is None:
                fences[i.worker_id] = [i.duration_ms, i.progress]
            else:
                fences[i.worker_id] = [i.duration_ms, i.progress, i.result]
        # The fleet slots these runs hold go in the same statement (and commit) as their rows.
        keys = [i.slot for i in items if i.slot is not None]
        holders = [
            slot_holder(i.id, ClaimRef(i.worker_id, i.claim)) for i in items if i.slot is not None
        ]
        rows = await retry_deadlock(
            self._fetch,
            self._ack_sql,
            list(batch),
            dumps(batch),
            now,
            width,
            start,
            "running",
            keys,
            holders,
        )
        # Keyed by the whole fence: of two acks of one id in a batch, only the claim that
        # matched the row landed.
        landed = {(r["id"], r["claimed_by"], r["claim"]) for r in rows}
        for queue in (rows[0]["woke"] or ()) if rows else ():
            self._parent_woken(queue)
        return {i for i in items if (i.id, i.worker_id, i.claim) in landed}

    async def start_ahead(self, job_id: str, ref: ClaimRef) -> bool:
        """Coalesced like the acks (sql/queries/start_ahead.sql): one statement in flight."""
        return await self._starts.submit(_Start(job_id, ref.worker_id, ref.claim))

    async def _flush_starts(self, items: Sequence[_Start]) -> set[_Start]:
        batch: dict[str, dict[str, dict[str, int]]] = {}
        for i in items:
            batch.setdefault(i.id, {}).setdefault(str(i.claim), {})[i.worker_id] = 1
        rows = await retry_deadlock(self._fetch, _START_AHEAD, list(batch), dumps(batch), "running")
        landed = {(r["id"], r["claimed_by"], r["claim"]) for r in rows}
        return {i for i in items if (i.id, i.worker_id, i.claim) in landed}

    async def nack(
        self, job_id: str, ref: ClaimRef, options: NackOptions, *, slot: str | None = None
    ) -> bool:
        progress = self.progress.settle(job_id)
        now = self.clock.now_ms()
        width, start = counter_bucket(now)
        row = await retry_deadlock(
            self._fetchrow,
            self._nack_sql,
            job_id,
            ref.worker_id,
            ref.claim,
            nack_state(options),
            options.count,
            options.error,
            options.run_at_ms,
            now,
            nack_counter(options),
            width,
            start,
            progress,
            options.unreachable_cap,
            ATTEMPT_ERRORS_KEPT,
            ATTEMPT_ERROR_CHARS,
            options.snooze,
            slot,
            None if slot is None else slot_holder(job_id, ref),
        )
        if row["woke"] is not None:
            self._parent_woken(row["woke"])
        return bool(row["settled"])

    def on_parent_woken(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(queue)`` whenever a settle of this driver makes a waiting parent due
        (its last child ended): ``announcing()`` publishes it on the Redis wake, so a parent
        whose queue another process serves starts without waiting for that worker's poll."""
        self._parent_wakes.append(callback)

    def _parent_woken(self, queue: str) -> None:
        """A parent its last child woke: due now, in this process too (LISTEN workers heard the
        statement's ``pg_notify``), and through every ``on_parent_woken`` callback."""
        signal_enqueued(queue)
        for callback in self._parent_wakes:
            callback(queue)

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        if visibility_ms < 1:
            raise InvariantError("visibility_ms must be at least 1", meta={"value": visibility_ms})
        result = await retry_deadlock(
            self._fetchval,
            _HEARTBEAT,
            job_id,
            ref.worker_id,
            ref.claim,
            self.clock.now_ms(),
            visibility_ms,
        )
        if result != "renewed":
            self.progress.forget(job_id)
        return cast(HeartbeatResult, result)

    # -- steps -------------------------------------------------------------------------------
    async def load_steps(self, run_id: str, *, tenant_id: str | None) -> list[StepRecord]:
        return [step_record(r) for r in await self._fetch(_LOAD_STEPS, run_id, tenant_id)]

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
        row = await retry_deadlock(
            self._fetchrow,
            _SAVE_STEP,
            job_id,
            ref.worker_id,
            ref.claim,
            run_id,
            name,
            dumps(output),
            started_at_ms,
            self.clock.now_ms(),
        )
        return bool(row is not None and row["owned"])

    # -- stats -------------------------------------------------------------------------------
    async def stats(self) -> DriverStats:
        now = self.clock.now_ms()
        async with self.pool.acquire() as conn:
            rows = await conn.fetch(_STATS, now, QUEUE_COUNT_CAP)
            paused = {r["name"] for r in await conn.fetch(_PAUSED, "queue")}
        counts: dict[str, dict[str, int]] = {}
        oldest: dict[str, int] = {}
        capped: dict[str, set[str]] = {}
        for r in rows:
            if r["capped"]:
                states = (
                    {r["state"], "due"}
                    if r["state"] in ("ready", "delayed", "suspended")
                    else {r["state"]}
                )
                capped.setdefault(r["queue"], set()).update(states)
            per = counts.setdefault(r["queue"], dict.fromkeys(ALL_STATES, 0) | {"due": 0})
            per[r["state"]] = int(r["n"])
            per["due"] += int(r["due"])
            if r["oldest_due_ms"] is not None:
                current = oldest.get(r["queue"])
                value = int(r["oldest_due_ms"])
                oldest[r["queue"]] = value if current is None else min(current, value)
        return DriverStats(
            queues={
                q: QueueStats(
                    queue=q,
                    oldest_due_run_at_ms=oldest.get(q),
                    paused=q in paused,
                    capped=frozenset(capped.get(q, ())),
                    **c,
                )
                for q, c in counts.items()
            }
        )

    async def scaler_depth(self, queues: Sequence[str]) -> int:
        """The scaler's queue depth (``sql/queries/scaler_depth.sql``), on the database clock."""
        return int(await self.pool.fetchval(_SCALER_DEPTH, list(queues)))

    async def close(self) -> None:
        """Wait for settles in flight and hand the held connections back. The pool is the
        caller's and stays open."""
        await self._acks.join()
        await self._starts.join()
        await self._leases.close()
        await self._conns.close()

    # -- the hot statements run on held connections (postgres_conns) ---------------------------
    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self._conns.run(lambda conn: conn.fetch(sql, *args))

    async def _fetchval(self, sql: str, *args: Any) -> Any:
        return await self._conns.run(lambda conn: conn.fetchval(sql, *args))

    async def _fetchrow(self, sql: str, *args: Any) -> Any:
        return await self._conns.run(lambda conn: conn.fetchrow(sql, *args))


def postgres_driver(
    pool: Pool, *, clock: Clock = SYSTEM_CLOCK, settlements: bool = False
) -> PostgresDriver:
    """The Postgres driver over ``pool`` (asyncpg). Run ``ujobs db migrate`` first.
    ``settlements``: write the settlements outbox in each settle (``PostgresDriver``)."""
    return PostgresDriver(pool, clock=clock, settlements=settlements)


__all__ = [
    "WAKE_CHANNEL",
    "WAKE_DUE_WITHIN_MS",
    "WAKE_SLOT_MS",
    "PostgresDriver",
    "postgres_driver",
    "wake_slot",
]
