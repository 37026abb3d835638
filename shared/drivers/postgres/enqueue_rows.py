"""The rows an enqueue sends, resolved from its requests (``ujobs.drivers.postgres.enqueue``
sends them): a single enqueue's statement arguments, and a batch's rows with its repeats
collapsed onto their first occurrence.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from ujobs.drivers.base import Enqueued, EnqueueRequest, check_enqueue_request, refuse_controls
from ujobs.drivers.postgres.rows import dumps
from ujobs.errors import InputInvalidError
from ujobs.ids import new_ids

NewRow = tuple[EnqueueRequest, str, str]
"""A request that is a row of its own, with the ids it is inserted under (id, run id)."""

COPY_CHUNK_ROWS = 64
"""A batch's COPY is sent this many requests at a time, each piece encoded while the server
inserts the one before it."""


class StampedJob:
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
        """The statement's $1..$12, with $9 run_at and $10 now taken at ``now`` (each statement
        takes ``request.priority`` after its own parameters)."""
        request = self.request
        run_at = request.run_at_ms if request.run_at_ms is not None else now
        if request.debounce_ms is not None:
            run_at = max(run_at, now + request.debounce_ms)
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


class BatchRows:
    """The rows a batch enqueue inserts, resolved from its requests in order as they are
    asked for: a repeat (an id or a live key an earlier request of the batch holds) is no row
    of its own and answers that earlier one, deduped. A request ``check_enqueue_request``
    refuses, or the iterable raising, ends the batch: ``error`` keeps it and the chunks end
    with None, which aborts the COPY."""

    def __init__(self, requests: Iterable[EnqueueRequest]) -> None:
        self._source = iter(requests)
        self.new: list[tuple[int, NewRow]] = []
        """Each request that is a row of its own, by its index in the batch."""
        self.error: Exception | None = None
        self._first_of: list[int] = []
        self._by_id: dict[str, int] = {}
        self._by_key: dict[tuple[str, str, str], int] = {}
        self._drained = False

    @property
    def count(self) -> int:
        """Requests resolved so far."""
        return len(self._first_of)

    def resolve(self, chunk_rows: int) -> Iterator[list[NewRow] | None]:
        """The new rows of the next ``chunk_rows`` requests, chunk by chunk; None (and the
        end) when a request is refused."""
        while not self._drained:
            try:
                taken = list(itertools.islice(self._source, chunk_rows))
                for request in taken:
                    check_enqueue_request(request)
                # Streamed as a COPY: debounce and unique_for need the per-job statement,
                # which the driver chose only when the batch's first request asked for it.
                refuse_controls(taken, "a batch whose first job has no debounce or unique_for")
            except Exception as error:  # the caller's iterable may raise anything
                self.error = error
                self._drained = True
                yield None
                return
            self._drained = len(taken) < chunk_rows
            minted = iter(new_ids(sum((not r.id) + (not r.run_id) for r in taken)))
            rows: list[NewRow] = []
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

    def _resolve(self, request: EnqueueRequest, minted: Iterator[str]) -> NewRow | None:
        index = len(self._first_of)  # self.count, without a property call per request
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
        row = (request, job_id, request.run_id or next(minted))
        self.new.append((index, row))
        return row

    def todo(self) -> list[tuple[int, dict[str, Any]]]:
        """The new rows as the statements read them (``batch_row``), by request index: built
        only when a statement sends the batch (the COPY writes each line from ``new``)."""
        return [(index, batch_row(*row)) for index, row in self.new]

    def answers_when_all_inserted(self) -> list[Enqueued]:
        """The answers when every row of ``todo`` was inserted."""
        fresh = [Enqueued(job_id, run_id, False) for _, (_, job_id, run_id) in self.new]
        if len(fresh) == self.count:
            return fresh  # no repeats inside the batch: every job is its own answer
        answers: list[Enqueued | None] = [None] * self.count
        for (index, _), inserted in zip(self.new, fresh, strict=True):
            answers[index] = inserted
        return self.answers(answers)

    def repeats(self) -> list[tuple[int, int]]:
        """(index, the earlier index it repeats) for each request that is no row of its own."""
        return [(i, first) for i, first in enumerate(self._first_of) if first != i]

    def answers(self, answers: list[Enqueued | None]) -> list[Enqueued]:
        """Every request's answer from its first occurrence's (``answers`` by index)."""
        out: list[Enqueued] = []
        for answer in self.answers_or_none(answers):
            assert answer is not None
            out.append(answer)
        return out

    def answers_or_none(self, answers: list[Enqueued | None]) -> list[Enqueued | None]:
        """``answers`` where a first occurrence may have none (it was refused): its repeats
        have none either."""
        out: list[Enqueued | None] = []
        for index, first in enumerate(self._first_of):
            answer = answers[first]
            if answer is not None and first != index:
                answer = Enqueued(answer.id, answer.run_id, True)
            out.append(answer)
        return out


def batch_row(request: EnqueueRequest, job_id: str, run_id: str) -> dict[str, Any]:
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
        "priority": request.priority,
        "slot_key": request.slot_key,
    }


__all__ = ["COPY_CHUNK_ROWS", "BatchRows", "NewRow", "StampedJob", "batch_row"]
