"""The two roads of a keyset CSV export write the same bytes.

By default Postgres writes each page (``COPY … (FORMAT csv)``, neutralised by its SELECT);
``keyset(copy=False)`` decodes the rows and the encoder writes them. A crashed export may
resume on the other road (an upgrade between attempts), and a user who switches should not
get a different file: both must agree on quoting, NULLs, line ends, neutralisation and every
type's text, whatever the pool's session settings.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterable, AsyncIterator
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import orjson
import pytest

from tests.exports.kit import attempt, enqueue, files, frozen_driver
from ujobs.exports.encoders import CsvEncoder
from ujobs.exports.family import export_rows
from ujobs.exports.keyset import keyset
from ujobs.exports.sinks import ObjectStoreSink, filesystem_sink
from ujobs.exports.writer import copies_csv
from ujobs.jobs.schema import t

COLUMNS = [
    "id",
    "txt",
    "at",
    "local",
    "day",
    "clock",
    "amount",
    "ratio",
    "ok",
    "doc",
    "docb",
    "ref",
]

# Text that is plain, quoted, multi-line, unicode, empty, NULL, and every neutralisation case.
TEXTS: list[str | None] = [
    "plain",
    None,
    "",
    'say "hi"',
    "a,b",
    "two\nlines",
    "cr\rhere",
    "crlf\r\nhere",
    "Zoë ☃ 日本語 🚀",
    "=1+2",
    "+1",
    "-1+2",
    "-12",
    "-12.50",
    "-.5",
    "-1e3",
    " -12",
    "@SUM(A1)",
    "\t=cmd",
    "\r=cmd",
    "\n=cmd",
    "  =cmd",
    '"=cmd',
    "'=cmd",
    " \"' @x",
    '""=q',
    "   ",
    "'",
    '"',
    "-",
    "ok=fine",
    "\\.",
    "é=x",
]
JSONS: list[Any] = [{"a": 1, "b": "=x"}, "=cmd", [1, "two", None], {"ü": "ß"}, None, 3.5]


def row(i: int) -> tuple[Any, ...]:
    at = datetime(2024, 1, 1, tzinfo=UTC) + timedelta(seconds=i * 3607, microseconds=i * 250_000)
    doc = JSONS[i % len(JSONS)]
    return (
        i,
        TEXTS[i % len(TEXTS)],
        at,
        None if i % 5 == 0 else at.replace(tzinfo=None) - timedelta(hours=3),
        date(1999, 12, 31) + timedelta(days=i),
        time(i % 24, i % 60, i % 60, (i * 1000) % 1_000_000),
        [Decimal("0.0000001"), Decimal("-12.50"), Decimal("1000"), Decimal("NaN"), None][i % 5],
        [0.1, -2.5e-7, 1e15, 123456.789, 0.0, None, 1e-4, 3.0][i % 8],
        [True, False, None][i % 3],
        None if doc is None else orjson.dumps(doc).decode(),
        None if doc is None else orjson.dumps(doc).decode(),
        uuid.UUID(int=i),
    )


@pytest.fixture
async def table(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[str]:
    schema = f"exp_{uuid.uuid4().hex[:10]}"
    async with pg_pool.acquire() as conn:
        await conn.execute(f'CREATE SCHEMA "{schema}"')
        await conn.execute(
            f'CREATE TABLE "{schema}".mixed (id bigint PRIMARY KEY, org_id text NOT NULL, '
            "txt text, at timestamptz NOT NULL, local timestamp, day date, clock time, "
            "amount numeric, ratio float8, ok bool, doc json, docb jsonb, ref uuid)"
        )
        await conn.executemany(
            f'INSERT INTO "{schema}".mixed (id, org_id, txt, at, local, day, clock, amount, '
            "ratio, ok, doc, docb, ref) "
            "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11::json, $12::jsonb, $13)",
            [(i, "org-1" if i % 9 else "org-2", *row(i)[1:]) for i in range(1, 120)],
        )
    try:
        yield f"{schema}.mixed"
    finally:
        async with pg_pool.acquire() as conn:
            await conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


@pytest.fixture
async def odd_pool(pg_dsn: str) -> AsyncIterator[asyncpg.Pool[Any]]:
    """A pool whose sessions write other text forms than the defaults: the COPY road must set
    its own (UTC, ISO, shortest floats) to match what asyncpg decodes."""
    pool = await asyncpg.create_pool(
        pg_dsn,
        min_size=1,
        max_size=4,
        server_settings={
            "TimeZone": "America/New_York",
            "DateStyle": "SQL, DMY",
            "extra_float_digits": "0",
        },
    )
    assert pool is not None
    try:
        yield pool
    finally:
        await pool.close()


def export(table: str, root: Path, copy: bool | None) -> Any:
    return export_rows(
        name="mixed.export",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            table, key="id", columns=COLUMNS, tenant_column="org_id", pool=run.ctx, copy=copy,
        ),
        columns=COLUMNS,
        sink=lambda: filesystem_sink(root),
        batch=13,
    )  # fmt: skip


async def written(table: str, root: Path, pool: asyncpg.Pool[Any], copy: bool | None) -> Any:
    handle = export(table, root, copy)
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle, ctx=pool)
    assert done.outcome == "completed", done.error
    return files(root)


async def test_postgres_pages_and_decoded_rows_write_the_same_bytes(
    table: str, odd_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    decoded = await written(table, tmp_path / "rows", odd_pool, copy=False)
    default = await written(table, tmp_path / "default", odd_pool, copy=None)
    forced = await written(table, tmp_path / "copy", odd_pool, copy=True)
    assert sorted(decoded) == sorted(default) == sorted(forced)
    assert len(decoded) == 10  # nine parts of org-1's 106 rows, and the manifest
    for key in decoded:
        if key.endswith("manifest.json"):  # the same but for each job's id
            same = [{**orjson.loads(m[key]), "jobId": None} for m in (decoded, default, forced)]
            assert same[0] == same[1] == same[2]
            continue
        assert default[key] == decoded[key], key
        assert forced[key] == decoded[key], key
    whole = b"".join(decoded[k] for k in sorted(decoded) if k.endswith(".csv"))
    assert whole.count(b"\n") > 106  # the multi-line cells are in it
    assert b"'=1+2" in whole
    assert b'"\'""=cmd"' in whole
    assert b",-12," in whole
    assert b"2024-01-01 01:00:07.25+00" in whole  # UTC, whatever the session's TimeZone


class _FailsOnce(ObjectStoreSink):
    """A filesystem sink whose write of ``part-00003`` fails on the first attempt."""

    def __init__(self, root: Path) -> None:
        local = filesystem_sink(root)
        super().__init__(local.store, url=local.url)
        self.failed = False

    async def write(self, key: str, chunks: AsyncIterable[bytes], *, content_type: str) -> int:
        if key.endswith("part-00003.csv") and not self.failed:
            self.failed = True
            raise ConnectionError("the store went away mid-export")
        return await super().write(key, chunks, content_type=content_type)


async def test_an_export_that_crashed_on_the_rows_road_resumes_on_the_copy_road_unchanged(
    table: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    """An upgrade between attempts: parts 0-2 decoded, the rest written by Postgres from the
    stored cursor — the artifact is the uninterrupted one, byte for byte."""
    reference = await written(table, tmp_path / "reference", pg_pool, copy=None)
    sink = _FailsOnce(tmp_path / "resumed")
    handle = export_rows(
        name="mixed.export",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=lambda run: keyset(
            table, key="id", columns=COLUMNS, tenant_column="org_id", pool=run.ctx,
            copy=False if run.attempt == 1 else None,
        ),
        columns=COLUMNS,
        sink=lambda: sink,
        batch=13,
    )  # fmt: skip
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    first = await attempt(driver, handle, ctx=pg_pool)
    assert first.outcome == "retried", first.error
    driver.clock.advance(3_600_000)  # type: ignore[attr-defined]
    second = await attempt(driver, handle, ctx=pg_pool)
    assert second.outcome == "completed", second.error
    resumed = files(tmp_path / "resumed")
    assert sorted(resumed) == sorted(reference)
    for key in reference:
        if key.endswith(".csv"):
            assert resumed[key] == reference[key], key


async def test_a_plain_keyset_csv_export_takes_the_copy_road_unless_it_needs_rows(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """The road a user gets by default: Postgres writes the CSV unless a row() transform, a
    non-CSV format, other columns or their order, or copy=False asks for decoded rows."""
    csv = CsvEncoder(COLUMNS)
    plain = keyset("mixed", key="id", columns=COLUMNS, pool=pg_pool, tenant_free=True)
    assert copies_csv(plain, None, csv, COLUMNS)
    assert not copies_csv(plain, lambda r: r, csv, COLUMNS)
    assert not copies_csv(plain, None, _Jsonl(), COLUMNS)
    assert not copies_csv(plain, None, csv, list(reversed(COLUMNS)))
    star = keyset("mixed", key="id", pool=pg_pool, tenant_free=True)
    assert not copies_csv(star, None, csv, COLUMNS)
    refused = keyset("mixed", key="id", columns=COLUMNS, pool=pg_pool, copy=False, tenant_free=True)
    assert not copies_csv(refused, None, csv, COLUMNS)


class _Jsonl:
    extension = "jsonl"
    content_type = "application/x-ndjson"

    def header(self) -> bytes:
        return b""

    def encode(self, rows: Any) -> bytes:
        return b""
