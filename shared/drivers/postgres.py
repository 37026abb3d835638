"""The Postgres driver: the queue in ``x_jobs``, every statement a named file in ``sql/queries``.

Time: every time-sensitive statement takes ``now`` from the driver's ``clock`` as a parameter
(epoch ms), so a test on a ``FrozenClock`` moves the real database's notion of "due" and
"lapsed" without sleeping. Only the event bus reads the database clock.

JSON crosses as text (see ``postgres_rows``), so the caller's pool needs no codec setup; the
driver never closes that pool (``close()`` only waits for settles in flight).

Throughput: a claim takes up to ``limit`` rows in one statement; acks that arrive while one is
in flight are sent together (``postgres_batch``); ``enqueue_many`` is one statement for N jobs.
The optional capabilities live beside this file: ``postgres_introspect`` (the operator
surface), ``postgres_leases`` (fleet slots), ``postgres_workers`` (the registry) and
``postgres_backfills`` (the ledger).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import asyncpg

from shared.clock import SYSTEM_CLOCK, Clock
from shared.drivers.base import (
    ALL_STATES,
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
    check_enqueue_request,
    nack_counter,
    nack_state,
)
from shared.drivers.postgres_backfills import PostgresBackfillLedger
from shared.drivers.postgres_batch import SettleBatcher
from shared.drivers.postgres_introspect import PostgresIntrospection
from shared.drivers.postgres_leases import PostgresLeaseStore
from shared.drivers.postgres_progress import ProgressThrottle
from shared.drivers.postgres_rows import claimed_job, dumps, exhausted_job, step_record
from shared.drivers.postgres_workers import PostgresWorkerRegistry
from shared.errors import ClaimQueuesEmptyError, InvariantError
from shared.ids import new_id
from shared.sql import query

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]
JSONValue = Any

WAKE_CHANNEL = "x_jobs_wake"
WAKE_SLOT_MS = 250
"""An enqueue announces its queue at most once per slot of this width."""
WAKE_DUE_WITHIN_MS = 1_000
"""Only rows due within this much of now are announced; later ones start on the poll."""
ENQUEUE_RETRIES = 5

_ENQUEUE = query("enqueue")
_ENQUEUE_MANY = query("enqueue_many")
_CLAIM = query("claim")
_ACK = query("ack")
_NACK = query("nack")
_HEARTBEAT = query("heartbeat")
_SAVE_STEP = query("save_step")
_LOAD_STEPS = query("load_steps")
_STATS = query("stats")
_PAUSED = query("paused")
_SCALER_DEPTH = query("scaler_depth")

# Which named statements each JobDriver operation runs (tests/integration prove the map).
OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "enqueue": ("enqueue",),
    "enqueue_many": ("enqueue_many",),
    "claim": ("claim",),
    "ack": ("ack",),
    "nack": ("nack",),
    "heartbeat": ("heartbeat",),
    "load_steps": ("load_steps",),
    "save_step": ("save_step",),
    "stats": ("stats", "paused"),
}


def counter_bucket(now_ms: int) -> tuple[int, int]:
    """``(width, start)`` of the 1-minute bucket a settle at ``now_ms`` counts in."""
    width = COUNTER_TIERS[0][0]
    return width, now_ms - now_ms % width


def wake_slot(run_at_ms: int, now_ms: int) -> int | None:
    """The 250 ms slot an enqueue at ``now_ms`` announces in; None when not due within 1 s."""
    return now_ms // WAKE_SLOT_MS if run_at_ms <= now_ms + WAKE_DUE_WITHIN_MS else None


@dataclass(frozen=True, slots=True)
class _Ack:
    id: str
    worker_id: str
    claim: int
    duration_ms: int | None
    progress: str | None


class PostgresDriver:
    """``JobDriver`` over an asyncpg pool. Build it with ``postgres_driver(pool)``."""

    name = "postgres"

    def __init__(self, pool: Pool, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self.pool = pool
        self.clock = clock
        self.progress = ProgressThrottle(clock)
        self._acks: SettleBatcher[_Ack] = SettleBatcher(self._flush_acks)
        self._introspect = PostgresIntrospection(pool, clock, self.progress)
        self._leases = PostgresLeaseStore(pool, clock)
        self._workers = PostgresWorkerRegistry(pool, clock)
        self._backfills = PostgresBackfillLedger(pool, clock)

    # -- capabilities ------------------------------------------------------------------------
    @property
    def introspect(self) -> PostgresIntrospection:
        return self._introspect

    @property
    def leases(self) -> PostgresLeaseStore:
        return self._leases

    @property
    def workers(self) -> PostgresWorkerRegistry:
        return self._workers

    @property
    def backfills(self) -> PostgresBackfillLedger:
        return self._backfills

    # -- enqueue -----------------------------------------------------------------------------
    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        check_enqueue_request(request)
        job_id = request.id or new_id()
        run_id = request.run_id or new_id()
        input_text = dumps(request.input)
        for _ in range(ENQUEUE_RETRIES):
            now = self.clock.now_ms()
            run_at = request.run_at_ms if request.run_at_ms is not None else now
            rows = await self.pool.fetch(
                _ENQUEUE,
                job_id,
                run_id,
                request.name,
                request.queue,
                input_text,
                request.tenant_id,
                request.idempotency_key,
                request.max_attempts,
                run_at,
                now,
                request.traceparent,
                request.enqueued_by,
                wake_slot(run_at, now),
            )
            if rows:
                return Enqueued(rows[0]["id"], rows[0]["run_id"], rows[0]["deduped"])
        raise InvariantError(
            "enqueue kept meeting a concurrent enqueue of the same id or key that neither "
            "committed nor rolled back; retry the enqueue",
            meta={"name": request.name, "id": job_id},
        )

    async def enqueue_many(self, requests: Sequence[EnqueueRequest]) -> list[Enqueued]:
        """One statement for the batch. Repeats inside it (same id, or same live key) answer
        the first occurrence, deduped, exactly as N single enqueues in order would."""
        answers: list[Enqueued | None] = [None] * len(requests)
        first_of: list[int] = []
        by_id: dict[str, int] = {}
        by_key: dict[tuple[str, str, str], int] = {}
        prepared: list[tuple[int, str, str, str]] = []
        for request in requests:
            check_enqueue_request(request)  # the whole batch first: a bad one inserts nothing
        for index, request in enumerate(requests):
            key = (request.name, request.tenant_id or "", request.idempotency_key)
            earlier = by_id.get(request.id) if request.id is not None else None
            if earlier is None:
                earlier = by_key.get(key)
            first_of.append(earlier if earlier is not None else index)
            if earlier is not None:
                continue
            job_id = request.id or new_id()
            by_id[job_id] = index
            by_key[key] = index
            prepared.append((index, job_id, request.run_id or new_id(), dumps(request.input)))
        todo = prepared
        for _ in range(ENQUEUE_RETRIES):
            if not todo:
                break
            todo = await self._enqueue_batch(requests, todo, answers)
        if todo:
            raise InvariantError(
                "enqueue_many kept meeting concurrent enqueues of the same ids or keys; retry",
                meta={"pending": len(todo)},
            )
        out: list[Enqueued] = []
        for index, first in enumerate(first_of):
            answer = answers[first]
            assert answer is not None
            out.append(answer if first == index else Enqueued(answer.id, answer.run_id, True))
        return out

    async def _enqueue_batch(
        self,
        requests: Sequence[EnqueueRequest],
        todo: list[tuple[int, str, str, str]],
        answers: list[Enqueued | None],
    ) -> list[tuple[int, str, str, str]]:
        now = self.clock.now_ms()
        reqs = [requests[index] for index, _, _, _ in todo]
        run_ats = [r.run_at_ms if r.run_at_ms is not None else now for r in reqs]
        rows = await self.pool.fetch(
            _ENQUEUE_MANY,
            [job_id for _, job_id, _, _ in todo],
            [run_id for _, _, run_id, _ in todo],
            [r.name for r in reqs],
            [r.queue for r in reqs],
            [text for _, _, _, text in todo],
            [r.tenant_id for r in reqs],
            [r.idempotency_key for r in reqs],
            [r.max_attempts for r in reqs],
            run_ats,
            now,
            [r.traceparent for r in reqs],
            [r.enqueued_by for r in reqs],
            now // WAKE_SLOT_MS,
            now + WAKE_DUE_WITHIN_MS,
        )
        again: list[tuple[int, str, str, str]] = []
        for row, item in zip(rows, todo, strict=True):
            if row["id"] is None:
                again.append(item)
            else:
                answers[item[0]] = Enqueued(row["id"], row["run_id"], row["deduped"])
        return again

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
        rows = await self.pool.fetch(
            _CLAIM,
            list(dict.fromkeys(options.queues)),
            options.limit,
            options.worker_id,
            now,
            options.visibility_ms,
            sorted(options.drop_exhausted),
            width,
            start,
        )
        claimed = [claimed_job(r) for r in rows if r["kind"] == "claimed"]
        buried = [exhausted_job(r) for r in rows if r["kind"] == "buried"]
        if buried and options.on_exhausted is not None:
            await options.on_exhausted(buried)
        return claimed

    # -- settle ------------------------------------------------------------------------------
    async def ack(self, job_id: str, ref: ClaimRef, *, duration_ms: int | None = None) -> bool:
        progress = self.progress.settle(job_id)
        item = _Ack(job_id, ref.worker_id, ref.claim, duration_ms, progress)
        return await self._acks.submit(item)

    async def _flush_acks(self, items: Sequence[_Ack]) -> set[_Ack]:
        now = self.clock.now_ms()
        width, start = counter_bucket(now)
        rows = await self.pool.fetch(
            _ACK,
            [i.id for i in items],
            [i.worker_id for i in items],
            [i.claim for i in items],
            [i.duration_ms for i in items],
            [i.progress for i in items],
            now,
            width,
            start,
        )
        # Keyed by the whole fence: of two acks of one id in a batch, only the claim that
        # matched the row landed.
        landed = {(r["id"], r["claimed_by"], r["claim"]) for r in rows}
        return {i for i in items if (i.id, i.worker_id, i.claim) in landed}

    async def nack(self, job_id: str, ref: ClaimRef, options: NackOptions) -> bool:
        progress = self.progress.settle(job_id)
        now = self.clock.now_ms()
        width, start = counter_bucket(now)
        settled = await self.pool.fetchval(
            _NACK,
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
        )
        return bool(settled)

    async def heartbeat(self, job_id: str, ref: ClaimRef, visibility_ms: int) -> HeartbeatResult:
        if visibility_ms < 1:
            raise InvariantError("visibility_ms must be at least 1", meta={"value": visibility_ms})
        result = await self.pool.fetchval(
            _HEARTBEAT, job_id, ref.worker_id, ref.claim, self.clock.now_ms(), visibility_ms
        )
        if result != "renewed":
            self.progress.forget(job_id)
        return cast(HeartbeatResult, result)

    # -- steps -------------------------------------------------------------------------------
    async def load_steps(self, run_id: str) -> list[StepRecord]:
        return [step_record(r) for r in await self.pool.fetch(_LOAD_STEPS, run_id)]

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
        row = await self.pool.fetchrow(
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
            rows = await conn.fetch(_STATS, now)
            paused = {r["name"] for r in await conn.fetch(_PAUSED, "queue")}
        counts: dict[str, dict[str, int]] = {}
        oldest: dict[str, int] = {}
        for r in rows:
            per = counts.setdefault(r["queue"], dict.fromkeys(ALL_STATES, 0) | {"due": 0})
            per[r["state"]] = int(r["n"])
            per["due"] += int(r["due"])
            if r["oldest_due_ms"] is not None:
                current = oldest.get(r["queue"])
                value = int(r["oldest_due_ms"])
                oldest[r["queue"]] = value if current is None else min(current, value)
        return DriverStats(
            queues={
                q: QueueStats(queue=q, oldest_due_run_at_ms=oldest.get(q), paused=q in paused, **c)
                for q, c in counts.items()
            }
        )

    async def scaler_depth(self, queues: Sequence[str]) -> int:
        """The scaler's queue depth (``sql/queries/scaler_depth.sql``), on the database clock."""
        return int(await self.pool.fetchval(_SCALER_DEPTH, list(queues)))

    async def close(self) -> None:
        """Wait for settles in flight. The pool is the caller's and stays open."""
        await self._acks.join()


def postgres_driver(pool: Pool, *, clock: Clock = SYSTEM_CLOCK) -> PostgresDriver:
    """The Postgres driver over ``pool`` (asyncpg). Run ``ujobs db migrate`` first."""
    return PostgresDriver(pool, clock=clock)


__all__ = ["PostgresDriver", "postgres_driver"]
