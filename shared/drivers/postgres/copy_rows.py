"""One job's batch (``RequestRows``) as COPY text: each line written from the batch's shared
fields, escaped once, and the row's own (ids, input, tenant, key, slot key, due time), with no
request built per row.

The rows are read, deduped and given their ids a chunk at a time as asyncpg sends the COPY
(``RowsCopy.chunk``), as ``BatchRows`` does for requests: a row whose key an earlier row of
the batch holds is no line of its own and answers that row, deduped. The lines are the ones
``ujobs.drivers.postgres.copy`` writes for the same requests (tests/unit/test_copy_rows.py).
When the COPY cannot answer the batch, ``requests()`` hands every row, read or not, to the
request path as the requests it stands for.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from ujobs.drivers.postgres.copy import ABORT_LINE, ESCAPES, NULL, PRIORITIES, timestamp
from ujobs.drivers.records import Enqueued, EnqueueRequest, check_enqueue_request
from ujobs.drivers.request_rows import RequestRows, Row
from ujobs.ids import new_ids

NewLine = tuple[str, str, Row]
"""A row that is a line of its own, with its ids (id, run id)."""


class RowsCopy:
    """A ``RequestRows`` batch as the COPY reads it; ``answers`` each row's answer once every
    line was inserted, ``error`` what a row met (the COPY then ends with ``ABORT_LINE``)."""

    def __init__(self, batch: RequestRows) -> None:
        self.batch = batch
        self._rows = batch.rows()
        self.read: list[Row] = []
        self.answers: list[Enqueued] = []
        self.error: Exception | None = None
        self.lines = 0
        """Rows that are lines of their own, read so far."""
        self.due = False
        """Whether a line written is due by ``due_by``."""
        self._first: dict[tuple[str, str], int] = {}
        self._drained = False

    def chunk(self, size: int) -> list[NewLine] | None:
        """The lines of the next ``size`` rows; None (kept in ``error``) when reading a row
        raised or the batch's shared fields are refused, and [] once every row was read."""
        if self._drained:
            return []
        read = self.read
        start = len(read)
        try:
            read.extend(itertools.islice(self._rows, size))
            if start == 0 and read:
                shared = self.batch.shared
                assert shared is not None  # set before the first row is yielded
                check_enqueue_request(self.batch.request(read[0]))  # every row shares the rest
        except Exception as error:  # the caller's iterable may raise anything
            self.error = error
            self._drained = True
            return None
        taken = read[start:]
        self._drained = len(taken) < size
        minted = iter(new_ids(2 * len(taken)))
        first, answers = self._first, self.answers
        lines: list[NewLine] = []
        for index, row in enumerate(taken, start):
            key = (row[3] or "", row[2])
            earlier = first.setdefault(key, index)
            if earlier != index:
                held = answers[earlier]
                answers.append(Enqueued(held.id, held.run_id, True))
                continue
            job_id, run_id = next(minted), next(minted)
            answers.append(Enqueued(job_id, run_id, False))
            lines.append((job_id, run_id, row))
        self.lines += len(lines)
        return lines

    def text(self, first: list[NewLine], size: int, now: int, due_by: int) -> Iterator[bytes]:
        """The COPY text of ``first`` and of every later chunk, as asyncpg reads it; it ends
        with ``ABORT_LINE`` when a row raised or cannot be written (a value that is not text,
        a time past what a datetime holds). ``due`` turns True when
        a line is due by ``due_by``."""
        shared = self.batch.shared
        assert shared is not None
        try:
            line = _writer(shared, now, timestamp(now))
        except (TypeError, AttributeError, OverflowError):
            yield ABORT_LINE
            return
        lines: list[NewLine] | None = first
        while lines:
            try:
                text = "".join([line(*new) for new in lines])
            except (TypeError, AttributeError, OverflowError):
                yield ABORT_LINE
                return
            if not self.due:
                self.due = any(row[5] is None or row[5] <= due_by for _, _, row in lines)
            yield text.encode()
            lines = self.chunk(size)
        if lines is None:
            yield ABORT_LINE

    def requests(self) -> Iterator[EnqueueRequest]:
        """Every row of the batch as its request: those read, then the rest as they are
        read (raising what a later row meets)."""
        request = self.batch.request
        for row in itertools.chain(self.read, self._rows):
            yield request(row)


def _writer(shared: EnqueueRequest, now: int, now_text: str) -> Callable[[str, str, Row], str]:
    """The line of a row of a batch sharing ``shared``'s fields, its newline included: the
    shared fields written and escaped once, in ``COLUMNS`` order around the row's own."""

    def text(value: str | None) -> str:
        return NULL if value is None else value.translate(ESCAPES)

    head = f"\t{text(shared.name)}\t{text(shared.queue)}\t"
    middle = f"\t{shared.max_attempts}\t"
    tail = f"\t{now_text}\t{now_text}\t{text(shared.traceparent)}\t{text(shared.enqueued_by)}\t"
    end = f"\t{PRIORITIES[shared.priority]}"

    def line(job_id: str, run_id: str, row: Row) -> str:
        _, encoded, key, tenant, slot, at = row
        data = encoded.decode()  # the bytes the input's check wrote: the one encoding
        if "\\" in data:  # JSON text holds no raw tab, newline or carriage return
            data = data.translate(ESCAPES)
        probe = f"{key}{tenant or ''}{slot or ''}"
        if "\\" in probe or "\t" in probe or "\n" in probe or "\r" in probe:
            key = key.translate(ESCAPES)
            tenant = None if tenant is None else tenant.translate(ESCAPES)
            slot = None if slot is None else slot.translate(ESCAPES)
        if at is None or at == now:
            state, run_at = "ready", now_text
        else:
            state, run_at = ("delayed" if at > now else "ready"), timestamp(at)
        return (
            f"{job_id}\t{run_id}{head}{state}\t{data}\t{NULL if tenant is None else tenant}\t"
            f"{key}{middle}{run_at}{tail}{NULL if slot is None else slot}{end}"
        )

    return line


__all__ = ["NewLine", "RowsCopy"]
