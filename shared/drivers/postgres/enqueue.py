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
the plain insert guarded, in the same statement, by the calling token being live;
``enqueue_many_while_live`` is a group of them (the api's group commit): ``enqueue_many.sql``
with each row's token check in the same statement (``enqueue_many_live.sql``). A request with
``debounce_ms`` or ``unique_for_ms`` goes through ``enqueue_controlled.sql`` instead, on every
one of these paths: one statement per job (in one transaction for a batch) that inserts, moves
the waiting holder, or answers the recent done run.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import AsyncIterator, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import asyncpg

from ujobs.clock import Clock
from ujobs.drivers.base import (
    Enqueued,
    EnqueueRequest,
    check_enqueue_request,
    refuse_controls,
)
from ujobs.drivers.postgres.copy import COLUMNS as COPY_COLUMNS
from ujobs.drivers.postgres.copy import copy_chunks, copy_target
from ujobs.drivers.postgres.copy_rows import RowsCopy
from ujobs.drivers.postgres.enqueue_rows import COPY_CHUNK_ROWS, BatchRows, NewRow, StampedJob
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.rows import dumps
from ujobs.drivers.postgres.sql import query
from ujobs.drivers.request_rows import RequestRows
from ujobs.errors import InputInvalidError, InvariantError, JobDuplicateError


class _HeldByRecentRun(Exception):
    """Raised inside a unique_for insert's transaction to roll it back: the key's holder was
    acked while the insert ran, so that run still holds the key (its ids)."""

    def __init__(self, job_id: str, run_id: str) -> None:
        super().__init__(job_id)
        self.job_id = job_id
        self.run_id = run_id


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

_ENQUEUE = query("enqueue")
_ENQUEUE_CONTROLLED = query("enqueue_controlled")
_UNIQUE_FOR_HOLDER = query("unique_for_holder")
_ENQUEUE_INSERT = query("enqueue_insert")
_ENQUEUE_INSERT_LIVE = query("enqueue_insert_live")
_ENQUEUE_MANY = query("enqueue_many")
_ENQUEUE_MANY_LIVE = query("enqueue_many_live")
_ENQUEUE_MANY_NEW = query("enqueue_many_new")
_ENQUEUE_WAKE = query("enqueue_wake")
_COPY_TABLE = copy_target(query("enqueue_many_copy"))


@dataclass(frozen=True, slots=True)
class GuardedAnswers:
    """What ``enqueue_many_while_live`` did with each request of a group."""

    answers: list[Enqueued | None]
    """Each request's answer in order; None: nothing was inserted for it, because its own
    token or the token of the earlier request of the group it repeats is not live."""
    dead: frozenset[str]
    """The tokens the statement found not live (revoked, expired or gone)."""


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
        stamped = StampedJob(request)
        if request.controlled:
            answer = await self._enqueue_controlled(stamped, None)
            assert answer is not None  # no token to find dead
            return answer
        args = stamped.at(self.clock.now_ms())
        if self._slot_to_announce(request.queue, wake_slot(args[8], args[9])) is None:
            rows = await self._fetch(_ENQUEUE_INSERT, *args, request.priority, request.slot_key)
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
        stamped = StampedJob(request)
        if request.controlled:
            return await self._enqueue_controlled(stamped, token_id)
        args = stamped.at(self.clock.now_ms())
        [row] = await self._fetch(_ENQUEUE_INSERT_LIVE, *args, token_id, request.priority)
        if not row["live"]:
            return None
        if row["id"] is None:
            return await self._enqueue_or_answer(request, stamped)
        slot = self._slot_to_announce(request.queue, wake_slot(args[8], args[9]))
        if slot is not None:
            await self._fetch(_ENQUEUE_WAKE, [request.queue], slot)
            self._seen_slot(request.queue, slot)  # announced now, or already by another process
        return Enqueued(row["id"], row["run_id"], False)

    async def enqueue_many_while_live(
        self, requests: Sequence[EnqueueRequest], tokens: Sequence[str | None]
    ) -> GuardedAnswers:
        """``requests`` in ONE statement (``enqueue_many_live``), each inserted only while its
        token (``tokens[i]``; None: no check) is live and deduped as ``enqueue_many`` dedupes:
        the api's group commit, one round trip where a token query and then the insert took
        two. A request repeating an earlier one of the group (its id or live key) answers that
        one's row, deduped, or None when that one's token was found dead. A bad request (or a
        statement error) raises, and nothing of the group is inserted."""
        if any(r.controlled for r in requests):
            for request in requests:
                check_enqueue_request(request)
            each = await self._enqueue_many_controlled(requests, tokens)
            refused = {t for t, a in zip(tokens, each, strict=True) if a is None and t}
            return GuardedAnswers(each, frozenset(refused))
        batch = BatchRows(requests)
        batch.resolve_all()
        todo = batch.todo()
        for index, row in todo:
            row["token"] = tokens[index]
        answers: list[Enqueued | None] = [None] * batch.count
        dead: set[str] = set()
        for _ in range(ENQUEUE_RETRIES):
            if not todo:
                return GuardedAnswers(batch.answers_or_none(answers), frozenset(dead))
            todo = await self._enqueue_batch(todo, answers, dead)
        raise InvariantError(
            "enqueue_many kept meeting concurrent enqueues of the same ids or keys; retry",
            meta={"pending": len(todo)},
        )

    async def _enqueue_controlled(
        self, stamped: StampedJob, token_id: str | None, conn: Any = None
    ) -> Enqueued | None:
        """``enqueue_controlled.sql``: a request with ``debounce_ms`` or ``unique_for_ms``,
        inserted, moved (debounced) or answered in one statement; None when ``token_id`` is
        not live. On ``conn`` when given (a batch's transaction), else a held connection."""
        request = stamped.request
        for _ in range(ENQUEUE_RETRIES):
            args = stamped.at(self.clock.now_ms())
            slot = wake_slot(args[8], args[9])
            params = (
                *args,
                self._slot_to_announce(request.queue, slot),
                request.debounce_ms,
                request.unique_for_ms,
                token_id,
                request.priority,
                request.stored_debounce_seq,
            )
            try:
                if conn is not None:
                    row = await self._controlled_once(conn, params)
                else:
                    row = await self._conns.run(
                        functools.partial(self._controlled_once, params=params)
                    )
            except _HeldByRecentRun as held:
                return Enqueued(held.job_id, held.run_id, True)
            if not row["live"]:
                return None
            if row["id"] is not None:
                if not row["deduped"] or row["debounced"]:
                    self._seen_slot(request.queue, slot)
                return Enqueued(row["id"], row["run_id"], row["deduped"], row["debounced"])
        raise InvariantError(
            "enqueue kept meeting a concurrent enqueue of the same id or key that neither "
            "committed nor rolled back; retry the enqueue",
            meta={"name": request.name, "id": stamped.job_id},
        )

    async def _controlled_once(self, conn: Any, params: tuple[Any, ...]) -> Any:
        """One ``enqueue_controlled`` statement; for a unique_for insert, checked again in
        the same transaction (a savepoint inside a batch's) with a fresh snapshot
        (``unique_for_holder.sql``): a holder acked while the insert ran rolls it back, and
        ``_HeldByRecentRun`` names that holder."""
        unique_for_ms = params[14]
        if unique_for_ms is None:
            [row] = await conn.fetch(_ENQUEUE_CONTROLLED, *params)
            return row
        async with conn.transaction():
            [row] = await conn.fetch(_ENQUEUE_CONTROLLED, *params)
            if row["id"] is not None and not row["deduped"]:
                name, tenant, key, now_ms = params[2], params[5], params[6], params[9]
                holder = await conn.fetchrow(
                    _UNIQUE_FOR_HOLDER, name, tenant, key, now_ms, unique_for_ms, row["id"]
                )
                if holder is not None:
                    raise _HeldByRecentRun(holder["id"], holder["run_id"])
            return row

    async def _enqueue_many_controlled(
        self, requests: Sequence[EnqueueRequest], tokens: Sequence[str | None] | None
    ) -> list[Enqueued | None]:
        """A batch holding a debounced or unique_for request: one ``enqueue_controlled``
        statement per request, in order, in ONE transaction (all or nothing, as the batch
        statement is; each statement sees the ones before it, so a repeat of a key inside the
        batch debounces or dedupes onto the earlier one). None: that request's token is dead."""
        stamped = [StampedJob(r) for r in requests]

        async def run(conn: Any) -> list[Enqueued | None]:
            async with conn.transaction():
                return [
                    await self._enqueue_controlled(s, tokens[i] if tokens else None, conn)
                    for i, s in enumerate(stamped)
                ]

        return await self._conns.run(run)

    async def _enqueue_or_answer(self, request: EnqueueRequest, stamped: StampedJob) -> Enqueued:
        """``enqueue.sql``: insert and announce, or answer the live holder (deduped)."""
        for _ in range(ENQUEUE_RETRIES):
            args = stamped.at(self.clock.now_ms())
            slot = wake_slot(args[8], args[9])
            rows = await self._fetch(
                _ENQUEUE,
                *args,
                self._slot_to_announce(request.queue, slot),
                request.priority,
                request.slot_key,
            )
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
        in it inserts nothing: the COPY is aborted and the error raised. A batch whose first
        request carries ``debounce_ms`` or ``unique_for_ms`` goes as one statement per request
        in one transaction (``_enqueue_many_controlled``), as does a list holding one anywhere:
        the COPY cannot honour them. A generator that starts without and yields them later is
        already streaming out: it is refused, ``X_ENQUEUE_OPTION_UNSUPPORTED``, and nothing is
        queued."""
        if isinstance(requests, RequestRows) and not self._deduping_batches:
            return await self._enqueue_rows(requests)
        source = iter(requests)
        head = next(source, None)
        if head is None:
            return []
        # A list is seen whole; a generator only as the COPY streams it, so its first
        # request decides.
        if head.controlled or (
            isinstance(requests, Sequence) and any(r.controlled for r in requests)
        ):
            every = [head, *source]
            for request in every:
                check_enqueue_request(request)
            controlled = await self._enqueue_many_controlled(every, None)
            return [a for a in controlled if a is not None]
        return await self._enqueue_requests(itertools.chain([head], source))

    async def _enqueue_rows(self, batch: RequestRows) -> list[Enqueued]:
        """``enqueue_many`` of one job's batch by COPY, each line written from the batch's
        shared fields and the row (``RowsCopy``), no request built; a batch with debounce or
        unique_for, or one the COPY could not answer, goes as its requests."""
        rows = RowsCopy(batch)
        first = rows.chunk(COPY_CHUNK_ROWS)
        if first is None:
            assert rows.error is not None
            raise rows.error  # nothing was sent
        shared = batch.shared
        if shared is None:
            return []
        if shared.controlled:
            every = list(rows.requests())
            for request in every:
                check_enqueue_request(request)
            controlled = await self._enqueue_many_controlled(every, None)
            return [a for a in controlled if a is not None]
        now = self.clock.now_ms()
        due_by = now + WAKE_DUE_WITHIN_MS
        if await self._copy(rows.text(first, COPY_CHUNK_ROWS, now, due_by)):
            if rows.due:
                await self._announce_copied({shared.queue}, now)
            return rows.answers
        if rows.error is not None:
            raise rows.error  # what the COPY met in the rows
        return await self._enqueue_requests(rows.requests(), copy=False)

    async def _enqueue_requests(
        self, requests: Iterator[EnqueueRequest], *, copy: bool = True
    ) -> list[Enqueued]:
        """``enqueue_many`` of ``requests`` (none controlled): by COPY (unless ``copy`` is
        False: it was just tried), else the statement."""
        batch = BatchRows(requests)
        chunks = batch.resolve(COPY_CHUNK_ROWS)
        first = next(chunks, None)  # never raises: a refusal is kept in batch.error
        if batch.error is not None:
            raise batch.error  # nothing was sent
        if not batch.new:
            return []
        if copy and await self._copy_batch(batch, itertools.chain([first], chunks)):
            return batch.answers_when_all_inserted()
        batch.resolve_all()  # raises what the COPY met in the requests
        todo = batch.todo()
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
        of a repeat). The api's ``/batch`` under ``onConflict: error``. A request with
        ``debounce_ms`` or ``unique_for_ms`` is refused (``X_ENQUEUE_OPTION_UNSUPPORTED``):
        "every one new or none" leaves nothing to debounce or dedupe onto."""
        requests = list(requests)
        refuse_controls(requests, "a batch under onConflict 'error'")
        batch = BatchRows(requests)
        batch.resolve_all()
        conflicts = [{"index": i, "sameAs": first} for i, first in batch.repeats()]
        if conflicts:
            raise _duplicates(conflicts, batch.count)
        rows = [row for _, row in batch.todo()]
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

    async def _copy_batch(self, batch: BatchRows, chunks: Iterator[list[NewRow] | None]) -> bool:
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
        if not await self._copy(copy_chunks(chunks, now)):
            return False
        due_by = now + WAKE_DUE_WITHIN_MS
        due = {
            request.queue
            for _, (request, _, _) in batch.new
            if request.run_at_ms is None or request.run_at_ms <= due_by
        }
        await self._announce_copied(due, now)
        return True

    async def _copy(self, text: Iterator[bytes]) -> bool:
        """One COPY of ``text`` into the jobs table; False when it failed (COPY is all or
        nothing: nothing was inserted), and a taken id or key (or a deadlock) sends the next
        ``COPY_PAUSE_BATCHES`` batches straight to the deduping statement."""
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
        return True

    async def _announce_copied(self, due: set[str], now: int) -> None:
        """``enqueue_wake`` for the queues of ``due`` (rows a COPY at ``now`` inserted that are
        due soon) whose 250 ms slot this process has not seen announced."""
        slot = now // WAKE_SLOT_MS
        queues = sorted(queue for queue in due if self._slot_to_announce(queue, slot) is not None)
        if queues:
            await self._fetch(_ENQUEUE_WAKE, queues, slot)
            for queue in queues:  # announced now, or already by another process
                self._seen_slot(queue, slot)

    async def _enqueue_batch(
        self,
        todo: list[tuple[int, dict[str, Any]]],
        answers: list[Enqueued | None],
        dead: set[str] | None = None,
    ) -> list[tuple[int, dict[str, Any]]]:
        """One ``enqueue_many`` statement (``enqueue_many_live`` when ``dead`` collects the
        rows' dead tokens): fills ``answers`` and answers the rows to send again (raced)."""
        now = self.clock.now_ms()
        for _, row in todo:
            row["run_at_ms"] = row["at"] if row["at"] is not None else now
        rows = await self._fetch(
            _ENQUEUE_MANY if dead is None else _ENQUEUE_MANY_LIVE,
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
            elif dead is not None and not holder["live"]:
                dead.add(item[1]["token"])  # refused: nothing inserted, its answer stays None
            elif holder["id"] is None:
                again.append(item)
            else:
                answers[item[0]] = Enqueued(holder["id"], holder["run_id"], True)
        return again


async def _stream(chunks: Iterator[bytes]) -> AsyncIterator[bytes]:
    """``chunks`` as the source of a COPY: asyncpg sends each as it comes."""
    for chunk in chunks:
        yield chunk


def _duplicates(conflicts: list[dict[str, Any]], total: int) -> JobDuplicateError:
    indexes = ", ".join(str(c["index"]) for c in conflicts[:20])
    more = f" and {len(conflicts) - 20} more" if len(conflicts) > 20 else ""
    return JobDuplicateError(
        f"{len(conflicts)} of {total} jobs conflict with a live run or an earlier job of the "
        f"batch (index {indexes}{more}); nothing was queued",
        meta={"conflicts": conflicts, "jobs": total},
    )
