"""Enqueue on Postgres: one statement per job, one statement per batch.

Both dedupe exactly like the contract says (an id that names any row, or a live row's
``(name, tenant, key)``, inserts nothing and answers that row) and announce the queue on
``x_jobs_wake`` at most once per 250 ms slot (sql/queries/enqueue.sql). A single enqueue with
no slot to announce first tries the plain insert (sql/queries/enqueue_insert.sql) and only
when that inserted nothing sends the full statement; a batch likewise first goes out as a
COPY (``enqueue_many_copy``, then ``enqueue_wake`` for the queues to announce) and sends
``enqueue_many`` only when that met a taken id or live key (a unique violation: COPY is all
or nothing, so nothing was inserted) or failed otherwise. A statement that found
neither a new row nor a holder met a concurrent enqueue of the same id or key that committed
after its snapshot; it is simply sent again. ``enqueue_while_live`` is the api's single enqueue:
the plain insert guarded, in the same statement, by the calling token being live.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import asyncpg

from shared.clock import Clock
from shared.drivers.base import Enqueued, EnqueueRequest, check_enqueue_request
from shared.drivers.postgres.copy import COLUMNS as COPY_COLUMNS
from shared.drivers.postgres.copy import copy_chunks, copy_target
from shared.drivers.postgres.held_connections import HeldConnections
from shared.drivers.postgres.rows import dumps
from shared.drivers.postgres.sql import query
from shared.errors import InputInvalidError, InvariantError, JobDuplicateError
from shared.ids import new_ids

WAKE_CHANNEL = "x_jobs_wake"
WAKE_SLOT_MS = 250
"""An enqueue announces its queue at most once per slot of this width."""
WAKE_DUE_WITHIN_MS = 1_000
"""Only rows due within this much of now are announced; later ones start on the poll."""
ENQUEUE_RETRIES = 5
COPY_PAUSE_BATCHES = 16
"""After a batch's COPY met a taken id or key, this many batches go straight to the
deduping statement: a caller re-sending work it already queued would otherwise pay a failed
statement (and leave its dead rows) on every batch."""
MAX_ANNOUNCED_QUEUES = 1_000
COPY_CHUNK_ROWS = 64
"""A batch's COPY is sent this many requests at a time, each piece encoded while the server
inserts the one before it."""

_ENQUEUE = query("enqueue")
_ENQUEUE_INSERT = query("enqueue_insert")
_ENQUEUE_INSERT_LIVE = query("enqueue_insert_live")
_ENQUEUE_MANY = query("enqueue_many")
_ENQUEUE_MANY_NEW = query("enqueue_many_new")
_ENQUEUE_WAKE = query("enqueue_wake")
_COPY_TABLE = copy_target(query("enqueue_many_copy"))


def wake_slot(run_at_ms: int, now_ms: int) -> int | None:
    """The 250 ms slot an enqueue at ``now_ms`` announces in; None when not due within 1 s."""
    return now_ms // WAKE_SLOT_MS if run_at_ms <= now_ms + WAKE_DUE_WITHIN_MS else None


class PostgresEnqueuer:
    def __init__(self, conns: HeldConnections, clock: Clock) -> None:
        self._conns = conns
        self.clock = clock
        # queue -> the last 250 ms slot this process knows was announced (by it or, since its
        # own statement found the slot taken, by another): no need to ask the table again.
        self._announced: dict[str, int] = {}
        self._deduping_batches = 0  # batches left before COPY is tried again

    def _slot_to_announce(self, queue: str, slot: int | None) -> int | None:
        return None if slot is None or self._announced.get(queue) == slot else slot

    def _seen_slot(self, queue: str, slot: int | None) -> None:
        if slot is not None:
            if len(self._announced) >= MAX_ANNOUNCED_QUEUES:
                self._announced.clear()
            self._announced[queue] = slot

    async def _fetch(self, sql: str, *args: Any) -> list[Any]:
        return await self._conns.run(lambda conn: conn.fetch(sql, *args))

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        """The plain ``enqueue_insert`` when there is no wake to announce (almost every call
        under load: one announcement per queue per 250 ms slot), else — and whenever that
        inserted nothing — ``enqueue``, which also answers the holder and announces."""
        check_enqueue_request(request)
        stamped = _Stamped(request)
        args = stamped.at(self.clock.now_ms())
        if self._slot_to_announce(request.queue, wake_slot(args[8], args[9])) is None:
            rows = await self._fetch(_ENQUEUE_INSERT, *args)
            if rows:
                return Enqueued(rows[0]["id"], rows[0]["run_id"], False)
        return await self._enqueue_or_answer(request, stamped)

    async def enqueue_while_live(self, request: EnqueueRequest, token_id: str) -> Enqueued | None:
        """``enqueue``, its insert guarded in the same statement by the api token ``token_id``
        being live (``enqueue_insert_live``): None, and nothing inserted, when the token is
        revoked, expired or gone. One round trip where a lookup and then an insert took two.

        A live token whose row was not inserted met a live key or a taken id: ``enqueue.sql``
        then answers the holder, exactly as ``enqueue`` does. A row due now whose queue's 250 ms
        slot this process has not announced is announced by ``enqueue_wake`` after the insert
        committed (once per queue per slot: the statement stays a plain insert)."""
        check_enqueue_request(request)
        stamped = _Stamped(request)
        args = stamped.at(self.clock.now_ms())
        [row] = await self._fetch(_ENQUEUE_INSERT_LIVE, *args, token_id)
        if not row["live"]:
            return None
        if row["id"] is None:
            return await self._enqueue_or_answer(request, stamped)
        slot = self._slot_to_announce(request.queue, wake_slot(args[8], args[9]))
        if slot is not None:
            await self._fetch(_ENQUEUE_WAKE, [request.queue], slot)
            self._seen_slot(request.queue, slot)  # announced now, or already by another process
        return Enqueued(row["id"], row["run_id"], False)

    async def _enqueue_or_answer(self, request: EnqueueRequest, stamped: _Stamped) -> Enqueued:
        """``enqueue.sql``: insert and announce, or answer the live holder (deduped)."""
        for _ in range(ENQUEUE_RETRIES):
            args = stamped.at(self.clock.now_ms())
            slot = wake_slot(args[8], args[9])
            rows = await self._fetch(_ENQUEUE, *args, self._slot_to_announce(request.queue, slot))
            if rows:
                answer = Enqueued(rows[0]["id"], rows[0]["run_id"], rows[0]["deduped"])
                if not answer.deduped:
                    self._seen_slot(request.queue, slot)
                return answer
        raise InvariantError(
            "enqueue kept meeting a concurrent enqueue of the same id or key that neither "
            "committed nor rolled back; retry the enqueue",
            meta={"name": request.name, "id": stamped.job_id},
        )

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        """One statement for the batch. Repeats inside it (same id, or same live key) answer
        the first occurrence, deduped, exactly as N single enqueues in order would.

        ``requests`` is read as the COPY goes out, so a generator's requests are built while
        the server inserts the ones before. A bad request (or the iterable raising) anywhere
        in it inserts nothing: the COPY is aborted and the error raised."""
        batch = _Batch(requests)
        chunks = batch.resolve(COPY_CHUNK_ROWS)
        first = next(chunks, None)  # never raises: a refusal is kept in batch.error
        if batch.error is not None:
            raise batch.error  # nothing was sent
        if not batch.todo:
            return []
        if await self._copy_batch(batch, itertools.chain([first], chunks)):
            return batch.answers_when_all_inserted()
        batch.resolve_all()  # raises what the COPY met in the requests
        todo = batch.todo
        answers: list[Enqueued | None] = [None] * batch.count
        for _ in range(ENQUEUE_RETRIES):
            if not todo:
                break
            todo = await self._enqueue_batch(todo, answers)
        if todo:
            raise InvariantError(
                "enqueue_many kept meeting concurrent enqueues of the same ids or keys; retry",
                meta={"pending": len(todo)},
            )
        return batch.answers(answers)

    async def enqueue_many_new(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        """Every request as a new row, in one statement, or none (``enqueue_many_new.sql``):
        a request repeating an earlier one's id or key, or whose id names a row or whose key
        a live row holds, is ``X_JOB_DUPLICATE`` and nothing is inserted. ``meta.conflicts``
        names each such request's index with its holder's id (``sameAs``: the earlier index
        of a repeat). The api's ``/batch`` under ``onConflict: error``."""
        batch = _Batch(requests)
        batch.resolve_all()
        conflicts = [{"index": i, "sameAs": first} for i, first in batch.repeats()]
        if conflicts:
            raise _duplicates(conflicts, batch.count)
        rows = [row for _, row in batch.todo]
        for _ in range(ENQUEUE_RETRIES):
            now = self.clock.now_ms()
            for row in rows:
                row["run_at_ms"] = row["at"] if row["at"] is not None else now
            try:
                result = await self._fetch(
                    _ENQUEUE_MANY_NEW,
                    dumps(rows, error=InputInvalidError),
                    now,
                    now // WAKE_SLOT_MS,
                    now + WAKE_DUE_WITHIN_MS,
                )
            except asyncpg.UniqueViolationError:
                continue  # taken after this statement's snapshot: the next one sees the holder
            held = [{"index": r["ord"] - 1, "id": r["id"]} for r in result if r["ord"] != 0]
            if held:
                raise _duplicates(sorted(held, key=lambda c: c["index"]), batch.count)
            return [Enqueued(row["id"], row["run_id"], False) for row in rows]
        raise InvariantError(
            "enqueue_many_new kept meeting concurrent enqueues of the same ids or keys; retry",
            meta={"pending": len(rows)},
        )

    async def _copy_batch(
        self, batch: _Batch, chunks: Iterator[list[dict[str, Any]] | None]
    ) -> bool:
        """Every row of ``batch`` by COPY, then the wake; False when it was not tried (a recent
        batch met a taken id or key) or failed (COPY is all or nothing: then nothing was
        inserted, and the statement answers the batch or the caller raises what the requests
        met). ``chunks`` are the batch's rows, resolved and written ``COPY_CHUNK_ROWS``
        requests at a time as asyncpg sends them: the server inserts the first while the rest
        are still being built and encoded."""
        if self._deduping_batches:
            self._deduping_batches -= 1
            return False
        now = self.clock.now_ms()
        text = copy_chunks(chunks, now)
        try:
            await self._conns.run(
                lambda conn: conn.copy_to_table(
                    _COPY_TABLE, source=_stream(text), columns=COPY_COLUMNS
                )
            )
        except (asyncpg.UniqueViolationError, asyncpg.DeadlockDetectedError):
            self._deduping_batches = COPY_PAUSE_BATCHES
            return False
        except asyncpg.PostgresError:
            return False  # the statement inserts the batch or raises its own error
        slot = now // WAKE_SLOT_MS
        due_by = now + WAKE_DUE_WITHIN_MS
        due = {row["queue"] for _, row in batch.todo if row["at"] is None or row["at"] <= due_by}
        queues = sorted(queue for queue in due if self._slot_to_announce(queue, slot) is not None)
        if queues:
            await self._fetch(_ENQUEUE_WAKE, queues, slot)
            for queue in queues:  # announced now, or already by another process
                self._seen_slot(queue, slot)
        return True

    async def _enqueue_batch(
        self, todo: list[tuple[int, dict[str, Any]]], answers: list[Enqueued | None]
    ) -> list[tuple[int, dict[str, Any]]]:
        now = self.clock.now_ms()
        for _, row in todo:
            row["run_at_ms"] = row["at"] if row["at"] is not None else now
        rows = await self._fetch(
            _ENQUEUE_MANY,
            dumps([row for _, row in todo], error=InputInvalidError),
            now,
            now // WAKE_SLOT_MS,
            now + WAKE_DUE_WITHIN_MS,
        )
        skipped = {r["ord"]: r for r in rows if r["ord"] != 0}
        again: list[tuple[int, dict[str, Any]]] = []
        for ord_, item in enumerate(todo, start=1):
            holder = skipped.get(ord_)
            if holder is None:
                answers[item[0]] = Enqueued(item[1]["id"], item[1]["run_id"], False)
            elif holder["id"] is None:
                again.append(item)
            else:
                answers[item[0]] = Enqueued(holder["id"], holder["run_id"], True)
        return again


class _Stamped:
    """A single enqueue's statement arguments: its ids (minted once, so a retry sends the
    same row) and its input text, stamped with ``now`` per attempt."""

    def __init__(self, request: EnqueueRequest) -> None:
        self.request = request
        job_id, run_id = request.id, request.run_id
        if not job_id or not run_id:
            minted = new_ids(2)
            job_id = job_id or minted[0]
            run_id = run_id or minted[1]
        self.job_id, self.run_id = job_id, run_id
        self.input_text = dumps(request.input, error=InputInvalidError)

    def at(self, now: int) -> tuple[Any, ...]:
        """The statement's $1..$12, with $9 run_at and $10 now taken at ``now``."""
        request = self.request
        run_at = request.run_at_ms if request.run_at_ms is not None else now
        return (
            self.job_id,
            self.run_id,
            request.name,
            request.queue,
            self.input_text,
            request.tenant_id,
            request.idempotency_key,
            request.max_attempts,
            run_at,
            now,
            request.traceparent,
            request.enqueued_by,
        )


async def _stream(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` as the source of a COPY: asyncpg sends each as it comes."""
    for chunk in chunks:
        yield chunk


class _Batch:
    """The rows a batch enqueue inserts, resolved from its requests in order as they are
    asked for: a repeat (an id or a live key an earlier request of the batch holds) is no row
    of its own and answers that earlier one, deduped. A request ``check_enqueue_request``
    refuses, or the iterable raising, ends the batch: ``error`` keeps it and the chunks end
    with None, which aborts the COPY."""

    def __init__(self, requests: Iterable[EnqueueRequest]) -> None:
        self._source = iter(requests)
        self.todo: list[tuple[int, dict[str, Any]]] = []
        self.error: Exception | None = None
        self._first_of: list[int] = []
        self._by_id: dict[str, int] = {}
        self._by_key: dict[tuple[str, str, str], int] = {}
        self._drained = False

    @property
    def count(self) -> int:
        """Requests resolved so far."""
        return len(self._first_of)

    def resolve(self, chunk_rows: int) -> Iterator[list[dict[str, Any]] | None]:
        """The new rows of the next ``chunk_rows`` requests, chunk by chunk; None (and the
        end) when a request is refused."""
        while not self._drained:
            try:
                taken = list(itertools.islice(self._source, chunk_rows))
                for request in taken:
                    check_enqueue_request(request)
            except Exception as error:  # the caller's iterable may raise anything
                self.error = error
                self._drained = True
                yield None
                return
            self._drained = len(taken) < chunk_rows
            minted = iter(new_ids(sum((not r.id) + (not r.run_id) for r in taken)))
            rows: list[dict[str, Any]] = []
            for request in taken:
                row = self._resolve(request, minted)
                if row is not None:
                    rows.append(row)
            yield rows

    def resolve_all(self) -> None:
        """Every request resolved; raises what a request met, if one did."""
        for _ in self.resolve(COPY_CHUNK_ROWS):
            pass
        if self.error is not None:
            raise self.error

    def _resolve(self, request: EnqueueRequest, minted: Iterator[str]) -> dict[str, Any] | None:
        index = self.count
        key = (request.name, request.tenant_id or "", request.idempotency_key)
        earlier = self._by_id.get(request.id) if request.id is not None else None
        if earlier is None:
            earlier = self._by_key.get(key)
        self._first_of.append(index if earlier is None else earlier)
        if earlier is not None:
            return None
        job_id = request.id or next(minted)
        self._by_id[job_id] = index
        self._by_key[key] = index
        row = _batch_row(request, job_id, request.run_id or next(minted))
        self.todo.append((index, row))
        return row

    def answers_when_all_inserted(self) -> list[Enqueued]:
        """The answers when every row of ``todo`` was inserted."""
        fresh = [Enqueued(row["id"], row["run_id"], False) for _, row in self.todo]
        if len(fresh) == self.count:
            return fresh  # no repeats inside the batch: every job is its own answer
        answers: list[Enqueued | None] = [None] * self.count
        for (index, _), inserted in zip(self.todo, fresh, strict=True):
            answers[index] = inserted
        return self.answers(answers)

    def repeats(self) -> list[tuple[int, int]]:
        """(index, the earlier index it repeats) for each request that is no row of its own."""
        return [(i, first) for i, first in enumerate(self._first_of) if first != i]

    def answers(self, answers: list[Enqueued | None]) -> list[Enqueued]:
        """Every request's answer from its first occurrence's (``answers`` by index)."""
        out: list[Enqueued] = []
        for index, first in enumerate(self._first_of):
            answer = answers[first]
            assert answer is not None
            out.append(answer if first == index else Enqueued(answer.id, answer.run_id, True))
        return out


def _duplicates(conflicts: list[dict[str, Any]], total: int) -> JobDuplicateError:
    indexes = ", ".join(str(c["index"]) for c in conflicts[:20])
    more = f" and {len(conflicts) - 20} more" if len(conflicts) > 20 else ""
    return JobDuplicateError(
        f"{len(conflicts)} of {total} jobs conflict with a live run or an earlier job of the "
        f"batch (index {indexes}{more}); nothing was queued",
        meta={"conflicts": conflicts, "jobs": total},
    )


def _batch_row(request: EnqueueRequest, job_id: str, run_id: str) -> dict[str, Any]:
    """One job of an ``enqueue_many`` batch, as ``jsonb_to_recordset`` reads it."""
    return {
        "id": job_id,
        "run_id": run_id,
        "name": request.name,
        "queue": request.queue,
        "input": request.input,
        "tenant_id": request.tenant_id,
        "idempotency_key": request.idempotency_key,
        "max_attempts": request.max_attempts,
        "at": request.run_at_ms,
        "traceparent": request.traceparent,
        "enqueued_by": request.enqueued_by,
    }
