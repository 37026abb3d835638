"""A batch enqueue's COPY (sql/queries/enqueue_many_copy.sql) stores exactly the rows the
deduping statement (enqueue_many.sql) stores, whatever the text holds, and hands every batch
COPY cannot carry to that statement."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.integration.test_postgres_driver import listen, wait_quiet
from ujobs import Run, job, t
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.copy import COLUMNS, copy_target, timestamp
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.postgres.enqueue_rows import COPY_CHUNK_ROWS
from ujobs.drivers.postgres.sql import query
from ujobs.errors import InputInvalidError
from ujobs.jobs.enqueue_target import set_job_driver

AWKWARD = "tab\there, line\nbreak, cr\rreturn, back\\slash, \\N, \\., é ☃ 𝄞"


def batch(tag: str, clock: FrozenClock) -> list[EnqueueRequest]:
    now = clock.now_ms()
    return [
        EnqueueRequest(name="send", input={"k": 1}, idempotency_key=f"{tag}-plain"),
        EnqueueRequest(
            name=f"send {AWKWARD}",
            input={"text": AWKWARD, "nested": [1, 2.5, None, True, {"u": "\\u0041"}]},
            idempotency_key=f"{tag}-{AWKWARD}",
            queue=f"q {AWKWARD}",
            tenant_id=f"org {AWKWARD}",
            max_attempts=7,
            id=f"{tag}-id {AWKWARD}",
            run_id=f"{tag}-run {AWKWARD}",
            traceparent=f"00-{AWKWARD}",
            enqueued_by=f"user {AWKWARD}",
        ),
        EnqueueRequest(
            name="send", input={}, idempotency_key=f"{tag}-later", run_at_ms=now + 61_001
        ),
        EnqueueRequest(name="send", input=[], idempotency_key=f"{tag}-earlier", run_at_ms=now - 5),
        EnqueueRequest(name="send", input=None, idempotency_key=f"{tag}-tenant", tenant_id=""),
    ]


async def stored(pool: asyncpg.Pool[Any], ids: list[str]) -> list[dict[str, Any]]:
    rows = await pool.fetch(
        "select name, queue, state, input::text as input, tenant_id, max_attempts, run_at,"
        " created_at, updated_at, traceparent, enqueued_by, attempt, claim"
        " from x_jobs where id = any($1::text[]) order by seq",
        ids,
    )
    return [dict(r) for r in rows]


async def test_copy_and_the_statement_store_the_same_rows(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    enqueuer = pg._enqueuer
    copied = await pg.enqueue_many(batch("a", clock))
    assert enqueuer._deduping_batches == 0  # the COPY took it
    enqueuer._deduping_batches = 1  # the next batch goes to the statement
    stated = await pg.enqueue_many(batch("b", clock))
    assert enqueuer._deduping_batches == 0
    assert not any(a.deduped for a in copied + stated)
    assert copied[1].id == f"a-id {AWKWARD}"
    assert copied[1].run_id == f"a-run {AWKWARD}"
    ids = await pg_pool.fetch(
        "select id, run_id, idempotency_key from x_jobs where id = any($1::text[]) order by seq",
        [a.id for a in copied],
    )
    assert [(r["id"], r["run_id"]) for r in ids] == [(a.id, a.run_id) for a in copied]
    assert ids[1]["idempotency_key"] == f"a-{AWKWARD}"
    a_rows = await stored(pg_pool, [a.id for a in copied])
    b_rows = await stored(pg_pool, [a.id for a in stated])
    assert a_rows == b_rows
    assert [r["state"] for r in a_rows] == ["ready", "ready", "delayed", "ready", "ready"]
    assert a_rows[4]["tenant_id"] == ""  # an empty tenant is not a null one
    assert a_rows[0]["tenant_id"] is None
    got = await pg.introspect.get(copied[2].id)
    assert got is not None
    assert got.run_at_ms == clock.now_ms() + 61_001
    assert got.created_at_ms == got.updated_at_ms == clock.now_ms()
    awkward = await pg.introspect.get(copied[1].id)
    assert awkward is not None
    assert awkward.input == {"text": AWKWARD, "nested": [1, 2.5, None, True, {"u": "\\u0041"}]}
    assert (awkward.traceparent, awkward.enqueued_by) == (f"00-{AWKWARD}", f"user {AWKWARD}")


async def test_a_batch_copy_cannot_carry_goes_to_the_statement(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    """A NUL jsonb refuses and a time past what a datetime holds: each raises what the
    statement raises, and a later batch still goes by COPY."""
    enqueuer = pg._enqueuer
    nul = [EnqueueRequest(name="send", input={"k": "a\x00b"}, idempotency_key="nul")]
    with pytest.raises(asyncpg.PostgresError) as by_copy:
        await pg.enqueue_many(nul)
    enqueuer._deduping_batches = 1
    with pytest.raises(asyncpg.PostgresError) as by_statement:
        await pg.enqueue_many(nul)
    assert type(by_copy.value) is type(by_statement.value)
    far = 400_000 * 365 * 86_400_000  # year ~400,000: past a datetime and a timestamptz
    late = [EnqueueRequest(name="send", input={}, idempotency_key="far", run_at_ms=far)]
    with pytest.raises(asyncpg.PostgresError):
        await pg.enqueue_many(late)
    assert enqueuer._deduping_batches == 0
    odd = EnqueueRequest(name="send", input={}, idempotency_key="odd", tenant_id=5)  # type: ignore[arg-type]
    [stated] = await pg.enqueue_many([odd])  # not text: the statement casts it, as before
    assert stated.deduped is False
    assert (await pg.introspect.get(stated.id)).tenant_id == "5"  # type: ignore[union-attr]
    [ok] = await pg.enqueue_many([EnqueueRequest(name="send", input={}, idempotency_key="ok")])
    assert ok.deduped is False


async def test_a_batch_longer_than_a_chunk_dedupes_repeats_across_chunks(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    """Rows are resolved a chunk at a time: a repeat in a later chunk still answers the first
    occurrence (deduped, its id), and the COPY inserts each distinct job once."""
    size = 2 * COPY_CHUNK_ROWS + 3
    requests = [
        EnqueueRequest(name="spread", input={"i": i}, idempotency_key=f"spread-{i}")
        for i in range(size)
    ]
    repeat = EnqueueRequest(name="spread", input={"again": True}, idempotency_key="spread-0")
    answers = await pg.enqueue_many([*requests, repeat])
    assert pg._enqueuer._deduping_batches == 0  # the COPY took it
    assert [a.deduped for a in answers] == [False] * size + [True]
    assert (answers[-1].id, answers[-1].run_id) == (answers[0].id, answers[0].run_id)
    assert len({a.id for a in answers}) == size
    stored_ids = await pg_pool.fetch("select id from x_jobs where name = 'spread' order by seq")
    assert [r["id"] for r in stored_ids] == [a.id for a in answers[:size]]


async def test_a_row_copy_cannot_carry_late_in_a_long_batch_inserts_nothing_by_copy(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The COPY is streamed a chunk at a time, so the rows before a row it cannot write are
    already on the server when that row is met: the stream then ends with a line the server
    refuses, the COPY inserts none of them, and the statement answers the whole batch, each
    row once (or inserts none of it when it raises)."""
    enqueuer = pg._enqueuer
    copies: list[str] = []
    fetch = enqueuer._fetch

    async def recording(sql: str, *args: Any) -> list[Any]:
        copies.append(sql)
        return await fetch(sql, *args)

    monkeypatch.setattr(enqueuer, "_fetch", recording)

    def one(i: int, **kw: Any) -> EnqueueRequest:
        return EnqueueRequest(name="long", input={"i": i}, idempotency_key=f"long-{i}", **kw)

    size = 3 * COPY_CHUNK_ROWS + 5
    odd = [one(i) for i in range(size - 1)] + [one(size - 1, tenant_id=5)]
    answers = await pg.enqueue_many(odd)
    assert query("enqueue_many") in copies  # the statement answered it, not the COPY
    assert enqueuer._deduping_batches == 0  # not a taken key: the next batch tries COPY again
    assert not any(a.deduped for a in answers)
    count = "select count(*) from x_jobs where name = $1"
    assert await pg_pool.fetchval(count, "long") == size
    assert (
        await pg_pool.fetchval("select count(distinct id) from x_jobs where name = 'long'") == size
    )

    nul = [
        EnqueueRequest(name="nul", input={"i": i}, idempotency_key=f"nul-{i}")
        for i in range(size - 1)
    ] + [EnqueueRequest(name="nul", input={"k": "a\x00b"}, idempotency_key="nul-last")]
    with pytest.raises(asyncpg.PostgresError):
        await pg.enqueue_many(nul)
    assert await pg_pool.fetchval(count, "nul") == 0


async def test_a_handles_enqueue_many_streams_and_a_late_bad_input_queues_nothing(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    """``job.enqueue_many(inputs)`` builds each request as the COPY goes out: a bad input after
    more than two chunks were sent raises its X_INPUT_INVALID and inserts none of the batch;
    the good batch then goes by COPY, whole."""

    @job(
        name="streamed",
        input=t.object(n=t.number.int()),
        idempotency_key=lambda i: f"s{i.n}",
        tenant="none",
    )
    async def streamed(run: Run[Any]) -> None:
        """A no-op."""

    set_job_driver(pg)
    try:
        size = 2 * COPY_CHUNK_ROWS + 10
        bad = [{"n": i} for i in range(size)] + [{"n": "not a number"}]
        with pytest.raises(InputInvalidError) as info:
            await streamed.enqueue_many(bad)
        assert info.value.code == "X_INPUT_INVALID"
        count = "select count(*) from x_jobs where name = 'streamed'"
        assert await pg_pool.fetchval(count) == 0
        answers = await streamed.enqueue_many({"n": i} for i in range(size))
        assert not any(a.deduped for a in answers)
        assert await pg_pool.fetchval(count) == size
        assert pg._enqueuer._deduping_batches == 0  # the COPY took it
    finally:
        set_job_driver(None)


async def test_a_copied_batch_announces_due_queues_once_per_slot(
    pg: PostgresDriver, pg_dsn: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """enqueue_wake.sql after the COPY: only queues with a row due within 1 s, and not again
    in a slot this process already announced (then the statement is not even sent)."""
    enqueuer = pg._enqueuer
    sent: list[list[str]] = []
    fetch = enqueuer._fetch

    async def recording(sql: str, *args: Any) -> list[Any]:
        if sql == query("enqueue_wake"):
            sent.append(list(args[0]))
        return await fetch(sql, *args)

    monkeypatch.setattr(enqueuer, "_fetch", recording)

    def one(key: str, **kw: Any) -> EnqueueRequest:
        return EnqueueRequest(name="send", input={}, idempotency_key=key, **kw)

    conn, heard = await listen(pg_dsn)
    try:
        await pg.enqueue_many([one("far", run_at_ms=clock.now_ms() + 1_001, queue="later")])
        await pg.enqueue_many([one("a"), one("b", queue="other"), one("c")])
        await pg.enqueue_many([one("d"), one("e", queue="other")])  # this slot: announced
        clock.advance(250)
        await pg.enqueue_many([one("f", run_at_ms=clock.now_ms() + 1_000)])
        await wait_quiet(conn)
    finally:
        await conn.close()
    assert enqueuer._deduping_batches == 0  # every batch went by COPY
    assert sent == [["default", "other"], ["default"]]
    assert sorted(heard) == ["default", "default", "other"]


def test_the_copy_file_names_the_columns_in_the_order_rows_are_written() -> None:
    assert copy_target(query("enqueue_many_copy")) == "x_jobs"
    with pytest.raises(ValueError):
        copy_target("copy x_jobs (" + ", ".join(reversed(COLUMNS)) + ") from stdin")


async def test_timestamps_are_the_instants_x_ts_makes(pg_pool: asyncpg.Pool[Any]) -> None:
    """Exact where x_ts's float8 is; refused (the statement's path) where it is not."""
    refused = 0
    for ms in (0, 1, 999, 1_700_000_000_123, -1, -86_400_001, 8_000_000_000_000, *FAR):
        try:
            text = timestamp(ms)
        except OverflowError:
            refused += 1
            continue
        same = await pg_pool.fetchval("select $1::text::timestamptz = x_ts($2)", text, ms)
        assert same, ms
    assert 0 < refused < len(FAR)


FAR = [253_402_300_799_999 - 7 * i for i in range(50)]  # the last ms of year 9999 and before
