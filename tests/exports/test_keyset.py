"""``keyset()`` over real Postgres: pages by key (never OFFSET), resumable from a JSON cursor."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from tests.exports.kit import attempt, enqueue, files, frozen_driver
from ujobs.errors import ConfigInvalidError, InvariantError
from ujobs.exports.family import export_rows
from ujobs.exports.keyset import COPY_AHEAD, KeysetSource, decode_cursor, encode_cursor, keyset
from ujobs.exports.library_pool import set_library_pool
from ujobs.exports.sinks import filesystem_sink
from ujobs.jobs.schema import t

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
async def orders(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[str]:
    """A schema of this test's own with ``orders``: 57 rows of org-1 and 5 of org-2."""
    schema = f"exp_{uuid.uuid4().hex[:10]}"
    async with pg_pool.acquire() as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            f'CREATE TABLE "{schema}".orders (id bigint PRIMARY KEY, org_id text NOT NULL, '
            "placed_at timestamptz NOT NULL, total numeric(12,2) NOT NULL, note text, "
            "ref uuid NOT NULL UNIQUE)"
        )
        await conn.executemany(
            f'INSERT INTO "{schema}".orders VALUES ($1, $2, $3, $4, $5, $6)',
            [
                (
                    i * 10,
                    "org-1" if i <= 57 else "org-2",
                    T0 + timedelta(minutes=i),
                    Decimal(i) / 4,
                    "=cmd" if i == 3 else f"note {i}",
                    uuid.UUID(int=i),
                )
                for i in range(1, 63)
            ],
        )
    try:
        yield f"{schema}.orders"
    finally:
        async with pg_pool.acquire() as conn:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


async def read_all(source: KeysetSource, batch: int) -> tuple[list[Any], int]:
    """Every row, page by page through stored (JSON round-tripped) cursors."""
    out: list[Any] = []
    cursor: Any = None
    pages = 0
    while True:
        page = [r async for r in source.rows(cursor, batch)]
        pages += 1
        out.extend(page)
        if len(page) < batch:
            return out, pages
        cursor = orjson.loads(orjson.dumps(source.cursor(page[-1])))


async def test_pages_follow_the_key_with_a_filter_and_never_use_offset(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    source = keyset(
        orders,
        key="id",
        columns=["id", "note"],
        where="org_id = $1",
        args=["org-1"],
        pool=pg_pool,
        tenant_free=True,
    )
    assert "OFFSET" not in source.statements.first.upper()
    assert "OFFSET" not in source.statements.after.upper()
    rows, pages = await read_all(source, 10)
    assert [r["id"] for r in rows] == [i * 10 for i in range(1, 58)]
    assert pages == 6
    assert list(rows[0].keys()) == ["id", "note"]


async def test_a_row_inserted_behind_the_cursor_shifts_no_page(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    source = keyset(orders, key="id", columns=["id"], pool=pg_pool, tenant_free=True)
    first = [r async for r in source.rows(None, 5)]
    async with pg_pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {orders} VALUES (1, 'org-1', now(), 1, 'late', gen_random_uuid())"
        )
    second = [r async for r in source.rows(source.cursor(first[-1]), 5)]
    assert [r["id"] for r in second] == [60, 70, 80, 90, 100]


async def test_a_composite_uuid_or_timestamp_key_resumes_from_its_json_cursor(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    for key in (("org_id", "id"), "ref", "placed_at"):
        source = keyset(orders, key=key, pool=pg_pool, tenant_free=True)
        rows, _ = await read_all(source, 7)
        assert len(rows) == 62, key
        assert len({r["id"] for r in rows}) == 62, key


async def test_a_query_source_and_a_server_side_cursor_read_the_same_rows(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    query = f"SELECT id, total * 2 AS doubled FROM {orders} WHERE org_id = $1"
    plain = keyset(query, key="id", args=["org-2"], pool=pg_pool, tenant_free=True)
    streamed = keyset(query, key="id", args=["org-2"], pool=pg_pool, prefetch=2, tenant_free=True)
    a, _ = await read_all(plain, 2)
    b, _ = await read_all(streamed, 2)
    assert [dict(r) for r in a] == [dict(r) for r in b]
    assert [r["id"] for r in a] == [580, 590, 600, 610, 620]


def test_cursor_values_come_back_as_the_types_they_were() -> None:
    values = [7, "x", uuid.UUID(int=5), T0, date(2024, 2, 29), Decimal("1.50"), None]
    stored = orjson.loads(orjson.dumps(encode_cursor(values)))
    assert decode_cursor(stored) == values
    with pytest.raises(InvariantError):
        encode_cursor([b"bytes"])


@pytest.mark.parametrize(
    "options",
    [
        {"table_or_query": 'orders";drop', "key": "id"},
        {"table_or_query": "a.b.c", "key": "id"},
        {"table_or_query": "orders", "key": "id; drop"},
        {"table_or_query": "orders", "key": "id", "columns": ["note"]},
        {"table_or_query": "orders", "key": []},
        {"table_or_query": "orders", "key": "id", "prefetch": 0},
    ],
)
def test_a_bad_keyset_is_refused(pg_pool: Any, options: dict[str, Any]) -> None:
    with pytest.raises(InvariantError):
        keyset(pool=pg_pool, tenant_free=True, **options)


@pytest.mark.parametrize("copy", [None, False], ids=["copy-road", "decoded-through-a-cursor"])
async def test_export_rows_over_keyset_writes_one_csv_of_the_tenants_rows(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path, copy: bool | None
) -> None:
    handle = export_rows(
        name="orders.export",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            orders,
            key="id",
            columns=["id", "placed_at", "total", "note"],
            tenant_column="org_id",
            pool=run.ctx,
            prefetch=4,
            copy=copy,
        ),
        columns=["id", "placed_at", "total", "note"],
        sink=lambda: filesystem_sink(tmp_path),
        batch=20,
    )
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    found = files(tmp_path)
    whole = b"".join(found[f"exports/org-1/part-0000{i}.csv"] for i in range(3)).decode()
    rows = list(csv.reader(io.StringIO(whole, newline="")))
    assert rows[0] == ["id", "placed_at", "total", "note"]
    assert len(rows) == 58
    assert rows[1] == ["10", "2024-01-01 00:01:00+00", "0.25", "note 1"]
    assert rows[3][3] == "'=cmd"


async def test_select_star_rows_with_a_column_the_export_does_not_carry_are_refused(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    handle = export_rows(
        name="orders.star",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(orders, key="id", pool=run.ctx, tenant_column="org_id"),
        columns=["id", "note"],
        sink=lambda: filesystem_sink(tmp_path),
    )
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.code == "X_EXPORT_ROW_INVALID"
    assert "org_id" in getattr(done.error, "meta", {})["extra"]


async def test_text_mode_reads_columns_as_postgres_writes_them_and_keeps_a_typed_cursor(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    cols = ["id", "placed_at", "total", "ref"]
    typed = keyset(orders, key="placed_at", columns=cols, pool=pg_pool, tenant_free=True)
    text = keyset(orders, key="placed_at", columns=cols, pool=pg_pool, text=True, tenant_free=True)
    as_typed, _ = await read_all(typed, 9)
    as_text, pages = await read_all(text, 9)
    assert pages == 7
    assert [r["id"] for r in as_text] == [str(r["id"]) for r in as_typed]
    assert as_text[0]["placed_at"] == "2024-01-01 00:01:00+00"
    assert as_text[0]["total"] == "0.25"
    assert as_text[0]["ref"] == str(uuid.UUID(int=1))
    assert text.cursor(as_text[0]) == [{"$ts": "2024-01-01T00:01:00+00:00"}]
    with pytest.raises(InvariantError):
        keyset(orders, key="id", pool=pg_pool, text=True, tenant_free=True)


async def test_export_rows_over_a_text_keyset_writes_postgres_text_neutralised(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    cols = ["id", "placed_at", "total", "note"]
    handle = export_rows(
        name="orders.text",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            orders, key="id", columns=cols, tenant_column="org_id", pool=run.ctx, text=True,
        ),
        columns=cols,
        sink=lambda: filesystem_sink(tmp_path),
        batch=25,
    )  # fmt: skip
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    found = files(tmp_path)
    whole = b"".join(found[f"exports/org-1/part-0000{i}.csv"] for i in range(3)).decode()
    rows = list(csv.reader(io.StringIO(whole, newline="")))
    assert rows[0] == cols
    assert len(rows) == 58
    assert rows[1] == ["10", "2024-01-01 00:01:00+00", "0.25", "note 1"]
    assert rows[3][3] == "'=cmd"


def copy_export(orders: str, root: Path, **options: Any) -> Any:
    cols = options.pop("cols", ["id", "placed_at", "total", "note"])
    key = options.pop("key", "id")
    source_cols = options.pop("source_cols", cols)
    return export_rows(
        name=options.pop("name", "orders.copy"),
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            orders, key=key, columns=source_cols, tenant_column="org_id", pool=run.ctx,
            copy=True,
        ),
        columns=cols,
        sink=lambda: filesystem_sink(root),
        **options,
    )  # fmt: skip


async def test_copy_mode_writes_postgres_csv_neutralised_page_by_page(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    async with pg_pool.acquire() as conn:
        await conn.execute(
            f"UPDATE {orders} SET note = CASE id WHEN 20 THEN '-5' WHEN 40 THEN 'a,\"=b\"' "
            "WHEN 50 THEN '\"=c' WHEN 60 THEN NULL WHEN 70 THEN '' ELSE note END"
        )
    handle = copy_export(orders, tmp_path, batch=20)
    driver = frozen_driver()
    job_id = await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    assert done.result["parts"] == 3
    assert done.result["rows"] == 57
    found = files(tmp_path)
    parts = [found[f"exports/org-1/part-0000{i}.csv"] for i in range(3)]
    assert parts[0].startswith(b"id,placed_at,total,note\n10,2024-01-01 00:01:00+00,0.25,note 1\n")
    assert done.result["bytes"] == sum(len(p) for p in parts)
    rows = list(csv.reader(io.StringIO(b"".join(parts).decode(), newline="")))
    notes = {int(r[0]): r[3] for r in rows[1:]}
    assert [notes[i] for i in (20, 30, 40, 50, 60, 70)] == [
        "-5", "'=cmd", 'a,"=b"', "'\"=c", "", ""
    ]  # fmt: skip
    assert len(notes) == 57
    row = await driver.introspect.get(job_id)  # type: ignore[union-attr]
    assert row is not None
    steps = await driver.load_steps(row.run_id, tenant_id=row.tenant_id)
    assert steps[0].output["cursor"] == [200]


async def test_copy_mode_pages_a_composite_key_and_ends_without_an_empty_part(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    cols = ["org_id", "placed_at", "id"]
    handle = copy_export(orders, tmp_path, cols=cols, key=("org_id", "placed_at"), batch=19)
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    assert done.result["parts"] == 3  # 57 rows: three full pages, no empty fourth part
    found = files(tmp_path)
    ids = [
        int(line.split(",")[2])
        for i in range(3)
        for line in found[f"exports/org-1/part-0000{i}.csv"].decode().splitlines()
        if not line.startswith("org_id")
    ]
    assert ids == [i * 10 for i in range(1, 58)]


async def test_copy_mode_with_columns_other_than_the_exports_is_refused(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    handle = copy_export(orders, tmp_path, source_cols=["note", "id"], cols=["id", "note"])
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.code == "X_EXPORT_ROW_INVALID"


async def test_copy_mode_reads_the_next_page_ahead_and_drops_it_when_asked_elsewhere(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    source = keyset(orders, key="id", columns=["id"], pool=pg_pool, copy=True, tenant_free=True)
    first = await source.csv_page(None, 10)
    assert first.data.splitlines()[0] == b"10"
    ahead = list(source._ahead)
    assert ahead
    assert ahead[0][0] == first.cursor == [100]
    again = await source.csv_page(None, 10)  # a retry from the start: the read-ahead is dropped
    assert again == first
    assert all(task.cancelled() or task.done() for _, _, task in ahead)
    second = await source.csv_page(again.cursor, 10)
    assert second.data.splitlines()[0] == b"110"
    # The page after the second was started by the second's read; COPY_AHEAD pages at most.
    assert source._ahead[0][0] == [200]
    assert len(source._ahead) <= COPY_AHEAD
    third = await source.csv_page(second.cursor, 10)
    assert third.data.splitlines()[0] == b"210"
    last = await source.csv_page([600], 10)
    assert last.rows == 2
    assert not source._ahead
    past = await source.csv_page([620], 10)  # a max() bound over no rows: an empty page
    assert (past.rows, past.data, past.cursor) == (0, b"", [620])


async def test_a_full_fetched_page_reads_the_next_one_ahead_and_drops_it_when_asked_elsewhere(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    source = keyset(orders, key="id", columns=["id", "note"], pool=pg_pool, tenant_free=True)
    first = [r async for c in source.chunks(None, 10) for r in c]
    assert [r["id"] for r in first][:2] == [10, 20]
    ahead = source._fetch_ahead
    assert ahead is not None
    assert ahead[0] == source.cursor(first[-1]) == [100]
    again = [r async for c in source.chunks(None, 10) for r in c]  # a retry: ahead dropped
    assert again == first
    assert ahead[2].cancelled() or ahead[2].done()
    following = source._fetch_ahead
    assert following is not None
    second = [r async for c in source.chunks([100], 10) for r in c]
    assert following[2].done()
    assert [r["id"] for r in second] == list(range(110, 210, 10))
    last = [r async for c in source.chunks([600], 10) for r in c]
    assert [r["id"] for r in last] == [610, 620]
    assert source._fetch_ahead is None


@pytest.mark.parametrize(("copy", "parts"), [(True, 2), (False, 6)], ids=["copy", "rows"])
async def test_the_default_page_is_bigger_where_postgres_writes_the_csv(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path, copy: bool, parts: int
) -> None:
    """No ``batch=``: COPY_BATCH (50,000) rows a page when Postgres writes the CSV, whose
    pages are bytes and pay two statements each; DEFAULT_BATCH (10,000) for decoded rows."""
    async with pg_pool.acquire() as conn:
        await conn.execute(
            f"INSERT INTO {orders} SELECT 1000 + g, 'org-3', $1, g, 'n', gen_random_uuid() "
            "FROM generate_series(1, 50001) AS g",
            T0,
        )
    handle = export_rows(
        name="orders.defaults",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            orders, key="id", columns=["id", "total"], tenant_column="org_id", pool=run.ctx,
            copy=copy,
        ),
        columns=["id", "total"],
        sink=lambda: filesystem_sink(tmp_path),
    )  # fmt: skip
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-3"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert done.outcome == "completed", done.error
    assert (done.result["parts"], done.result["rows"]) == (parts, 50001)
    last = files(tmp_path)[f"exports/org-3/part-{parts - 1:05d}.csv"]
    assert last.splitlines() == [b"51001,50001.00"]


async def test_copy_mode_a_page_past_max_part_bytes_names_the_batch_and_dead_letters(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    """The heap bound holds on the road where Postgres writes the page, too: the page is
    checked before it is stored, and nothing is written."""
    handle = copy_export(orders, tmp_path, batch=20, max_part_bytes=200)
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pg_pool)
    assert (done.outcome, done.code) == ("dead-lettered", "X_EXPORT_PART_TOO_LARGE")
    assert "lower batch (now 20)" in str(done.error)
    assert getattr(done.error, "meta", {})["batch"] == 20
    assert files(tmp_path) == {}


async def test_the_default_copy_page_shrinks_to_fit_max_part_bytes_and_the_artifact_is_whole(
    pg_pool: asyncpg.Pool[Any], orders: str, tmp_path: Path
) -> None:
    """Without ``batch=`` the page size is ours, not the user's: a page past the bound is read
    again with fewer rows (and so are the next), instead of dead-lettering the export."""
    reference = copy_export(orders, tmp_path / "whole", name="orders.whole")
    fitted = copy_export(orders, tmp_path / "fitted", max_part_bytes=400)
    driver = frozen_driver()
    for handle in (reference, fitted):
        await enqueue(driver, handle, {"org_id": "org-1"})
        done = await attempt(driver, handle, ctx=pg_pool)
        assert done.outcome == "completed", done.error
        assert done.result["rows"] == 57
    whole = files(tmp_path / "whole")["exports/org-1/part-00000.csv"]
    found = files(tmp_path / "fitted")
    parts = [found[k] for k in sorted(found) if k.endswith(".csv")]
    assert len(parts) > 4
    assert all(len(p) <= 400 for p in parts)
    assert b"".join(parts) == whole


async def test_without_pool_it_reads_through_the_services_own_pool_or_says_there_is_none(
    pg_pool: asyncpg.Pool[Any], orders: str
) -> None:
    """``keyset()`` without ``pool=`` is made anywhere and reads, at its first page, the pool
    the service installed on ``DATABASE_URL``; a process without one is ``X_CONFIG_INVALID``
    naming the variable, never an ``AttributeError`` on a missing ctx."""
    source = keyset(orders, key="id", columns=["id"], tenant_free=True)
    with pytest.raises(ConfigInvalidError, match="keyset\\(\\) without pool=") as caught:
        await read_all(source, 100)
    assert caught.value.meta == {"variable": "DATABASE_URL"}
    set_library_pool(pg_pool)
    try:
        rows, _ = await read_all(keyset(orders, key="id", columns=["id"], tenant_free=True), 100)
    finally:
        set_library_pool(None)
    assert [r["id"] for r in rows] == [i * 10 for i in range(1, 63)]
