"""A handle's batch enqueue on Postgres (``RequestRows`` through ``copy_rows``): it stores
exactly the rows the same inputs' single enqueues store, refuses every bad input with the code
the single enqueue answers (and inserts nothing), and hands what its COPY cannot answer to the
deduping statement."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from ujobs import Run, job, t
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.postgres.enqueue_rows import COPY_CHUNK_ROWS
from ujobs.errors import UltimateError
from ujobs.jobs.declaration_rules import KeyedConcurrency
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.limits import MAX_JSON_DEPTH

AWKWARD = "tab\there, line\nbreak, cr\rreturn, back\\slash, \\N, \\., é ☃ 𝄞"

INPUTS: list[dict[str, Any]] = [
    {"n": 1, "text": "plain", "extra": None},
    {"n": 2, "text": AWKWARD, "extra": {"nested": [[[{"deep": [AWKWARD, "\\u0000"]}]]]}},
    {"n": 3, "text": "ünïcödé ☃", "extra": [2**63 - 1, -(2**63), 2**64 - 1, 2**53 + 1]},
    {"n": 4, "text": "", "extra": [1e300, -0.0, 0.1, 2.5, True, False, {"1": "int key"}]},
    {"n": 5, "text": "x" * 3000, "extra": {"é": {"☃": {"𝄞": []}}}},
]


@pytest.fixture
async def rows_job(pg: PostgresDriver) -> AsyncIterator[Any]:
    """A job that uses every per-input field: its tenant and slot key come from the input."""

    @job(
        name="rows-job",
        input=t.object(n=t.number.int(), text=t.string, extra=t.any),
        idempotency_key=lambda i: f"key {i.n} {AWKWARD}",
        tenant=lambda i: f"org {i.n % 2} {AWKWARD}",
        concurrency=KeyedConcurrency(key=lambda i: f"acct {i.n} {AWKWARD}", limit=2),
        priority=3,
    )
    async def rows_job(run: Run[Any]) -> None:
        """A no-op."""

    set_job_driver(pg)
    try:
        yield rows_job
    finally:
        set_job_driver(None)


COLUMNS = (
    "name, queue, state, input::text as input, tenant_id, idempotency_key, max_attempts,"
    " run_at, created_at, updated_at, traceparent, enqueued_by, slot_key, priority, attempt,"
    " claim"
)


async def stored(pool: asyncpg.Pool[Any], ids: list[str]) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        f"select {COLUMNS} from x_jobs where id = any($1::text[]) order by seq", ids
    )
    return [dict(r) for r in rows]


async def test_a_batch_stores_what_the_single_enqueues_store(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], rows_job: Any
) -> None:
    batch = await rows_job.enqueue_many(iter(INPUTS))
    assert pg._enqueuer._deduping_batches == 0  # the COPY took it
    from_batch = await stored(pg_pool, [a.id for a in batch])
    await pg_pool.execute("delete from x_jobs where name = 'rows-job'")  # the keys free again
    singles = [await rows_job.enqueue(value) for value in INPUTS]
    from_singles = await stored(pg_pool, [a.id for a in singles])
    assert from_batch == from_singles
    assert len(from_batch) == len(INPUTS)
    assert from_batch[1]["tenant_id"] == f"org 0 {AWKWARD}"
    assert from_batch[1]["slot_key"] == f"job-key:rows-job:acct 2 {AWKWARD}"
    assert from_batch[1]["priority"] == 3
    got = await pg.introspect.get(singles[2].id)
    assert got is not None
    assert got.input == INPUTS[2]  # big integers and non-ASCII read back exactly


async def test_a_batch_with_a_delay_and_repeats_across_chunks(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], rows_job: Any, clock: FrozenClock
) -> None:
    size = COPY_CHUNK_ROWS + 10
    values = [{"n": i, "text": "", "extra": None} for i in range(size)]
    values.append({"n": 3, "text": "a repeat of the fourth", "extra": None})
    answers = await rows_job.enqueue_many(values, delay="1h", priority=7)
    assert [a.deduped for a in answers] == [False] * size + [True]
    assert (answers[-1].id, answers[-1].run_id) == (answers[3].id, answers[3].run_id)
    rows = await pg_pool.fetch(
        "select state, priority, input from x_jobs where name = 'rows-job' order by seq"
    )
    assert len(rows) == size
    assert {(r["state"], r["priority"]) for r in rows} == {("delayed", 7)}


async def test_a_batch_meeting_a_live_key_goes_to_the_statement(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], rows_job: Any
) -> None:
    [held] = await rows_job.enqueue_many([INPUTS[1]])
    answers = await rows_job.enqueue_many(INPUTS)
    assert pg._enqueuer._deduping_batches > 0  # the COPY met the key; the statement answered
    assert [a.deduped for a in answers] == [False, True, False, False, False]
    assert answers[1].id == held.id
    count = "select count(*) from x_jobs where name = 'rows-job'"
    assert await pg_pool.fetchval(count) == len(INPUTS)
    # While the COPY pauses, a handle's batch goes as its requests, and still dedupes.
    again = await rows_job.enqueue_many(INPUTS)
    assert all(a.deduped for a in again)
    assert [a.id for a in again] == [a.id for a in answers]


async def test_a_batch_with_debounce_goes_one_statement_per_job(
    pg_pool: asyncpg.Pool[Any], rows_job: Any
) -> None:
    first = await rows_job.enqueue_many(INPUTS[:2], debounce="1s")
    moved = await rows_job.enqueue_many(INPUTS[:2], debounce="1s")
    assert [a.debounced for a in moved] == [True, True]
    assert [a.id for a in moved] == [a.id for a in first]


def _deep(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels):
        value = [value]
    return value


GOOD = {"n": 1, "text": "", "extra": None}

BAD: list[tuple[str, dict[str, Any], str]] = [
    ("invalid", {"n": "not a number", "text": "", "extra": None}, "X_INPUT_INVALID"),
    ("unknown field", {"n": 1, "text": "", "extra": None, "more": 1}, "X_INPUT_INVALID"),
    ("too deep", {"n": 1, "text": "", "extra": _deep(MAX_JSON_DEPTH)}, "X_INPUT_INVALID"),
    ("nul", {"n": 1, "text": "a\x00b", "extra": None}, "X_INPUT_INVALID"),
    ("past 64 bits", {"n": 1, "text": "", "extra": 2**64}, "X_INPUT_INVALID"),
    ("oversize key", {"n": 10**12, "text": "", "extra": None}, "X_IDEMPOTENCY_REQUIRED"),
    ("no tenant", {"n": -1, "text": "", "extra": None}, "X_JOB_TENANT_REQUIRED"),
    ("oversize slot key", {"n": -2, "text": "", "extra": None}, "X_JOB_DECLARATION_INVALID"),
]


@pytest.mark.parametrize("at", [0, 2 * COPY_CHUNK_ROWS + 5])
@pytest.mark.parametrize(("what", "bad", "code"), BAD, ids=[b[0] for b in BAD])
async def test_a_bad_input_anywhere_answers_its_code_and_queues_nothing(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], at: int, what: str, bad: Any, code: str
) -> None:
    @job(
        name="rows-bad",
        input=t.object(n=t.number.int(), text=t.string, extra=t.any),
        idempotency_key=lambda i: "k" * 600 if i.n == 10**12 else f"k{i.n}",
        tenant=lambda i: None if i.n == -1 else "org",
        concurrency=KeyedConcurrency(key=lambda i: "s" * 300 if i.n == -2 else f"s{i.n}"),
    )
    async def rows_bad(run: Run[Any]) -> None:
        """A no-op."""

    set_job_driver(pg)
    try:
        with pytest.raises(UltimateError) as single:
            await rows_bad.enqueue(bad)
        values = [{"n": i, "text": "", "extra": None} for i in range(at)] + [bad]
        with pytest.raises(UltimateError) as batch:
            await rows_bad.enqueue_many(iter(values))
        assert batch.value.code == single.value.code == code
        assert str(batch.value) == str(single.value)
        assert await pg_pool.fetchval("select count(*) from x_jobs where name = 'rows-bad'") == 0
        with pytest.raises(UltimateError) as priority:
            await rows_bad.enqueue_many(iter(values[:-1] or [GOOD]), priority=10)
        assert priority.value.code == "X_PRIORITY_INVALID"
    finally:
        set_job_driver(None)
