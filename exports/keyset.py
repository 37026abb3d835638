"""``keyset(...)``: a table or a query read page by page by its key, over asyncpg.

Each page is ``WHERE (key) > (cursor) ORDER BY key LIMIT n`` — never ``OFFSET``, whose cost
grows with every page and whose pages shift when rows are inserted meanwhile. The key must be
unique (a primary key, or several columns that are unique together) and should be indexed; the
cursor is the last row's key, stored as JSON (UUIDs, dates, timestamps and decimals are tagged
so they come back as the same type).

A CSV export without ``row()`` whose columns are the source's, in order, lets Postgres write
each page (``copy=None``, the default; ``copy=True`` insists, ``copy=False`` always decodes
rows): the page's last key and size are read first, then ``COPY (SELECT … WHERE key in that
range) TO STDOUT (FORMAT csv)`` in the same snapshot, with UTC timestamps, ISO dates and
shortest floats set for the transaction. The SELECT neutralises every column that is not a
number, a truth value, a UUID, a date or a time (``keyset_sql.NEUTRALISED``), so the page is
the part as Postgres sends it: the same bytes the encoder writes from decoded rows.

Without ``prefetch`` each page is one ``fetch``, and a full page starts fetching the next on
another connection before it answers, so Postgres reads page N+1 while page N is encoded.

``prefetch=N`` streams each page through a server-side cursor, ``N`` rows at a time inside a
read-only transaction, instead of one ``fetch`` of the whole page: the page is never a list in
memory, which matters for wide rows and big batches.

The statements are composed by ``ujobs.exports.keyset_sql`` from named templates, identifiers that
are checked and double-quoted, and a ``where`` fragment the caller wrote; every value travels as
a parameter. ``where`` and ``args`` number their parameters from ``$1``; the tenant's, the
cursor's and the limit's come after them.

Tenancy is the library's, not the author's SQL: a source names the column holding each row's
tenant (``tenant_column="org_id"``) or declares that its rows belong to no tenant
(``tenant_free=True``); one that says neither is refused (``X_EXPORT_TENANCY_UNDECLARED``),
because an export over ``keyset("orders")`` without a ``where`` would otherwise write every
tenant's rows. With a tenant column, every statement of both roads (rows and COPY) keeps only
the rows of the tenant acting when the source is made — inside an export, its run's tenant —
passed as a bound parameter. Made under no tenant (an export declared ``tenant="none"``), it is
``X_TENANCY_ACTOR_ORG_REQUIRED`` unless made inside ``cross_tenant(reason)``, the written-down
escape that reads every tenant's rows.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from typing import Any, Protocol
from uuid import UUID

from ujobs.context import cross_tenant_reason, current_tenant
from ujobs.errors import (
    ExportTenancyUndeclaredError,
    InvariantError,
    TenancyActorOrgRequiredError,
)
from ujobs.exports.keyset_sql import (
    CSV_SETTINGS,
    MAX_TYPES,
    PLAIN_TYPES,
    KeysetStatements,
    key_name,
    keyset_statements,
    quote_ident,
)
from ujobs.exports.library_pool import library_pool

__all__ = ["COPY_AHEAD", "CsvPage", "KeysetSource", "decode_cursor", "encode_cursor", "keyset"]

# Pages the COPY road reads ahead of the one being stored, each on its own connection: two
# keep both cores of a small database busy formatting CSV while the exporter writes.
COPY_AHEAD = 2


class Executor(Protocol):
    """An asyncpg pool (or anything with its ``acquire()``)."""

    def acquire(self) -> Any: ...


@dataclass(frozen=True, slots=True)
class CsvPage:
    """A page as CSV records Postgres wrote."""

    data: bytes
    rows: int
    cursor: Any
    limit: int
    """The rows asked for: a page of fewer is the last one."""


class KeysetSource:
    """The ``ExportSource`` ``keyset()`` answers."""

    def __init__(
        self,
        *,
        relation: str,
        key: tuple[str, ...],
        columns: tuple[str, ...] | None,
        where: str | None,
        args: tuple[Any, ...],
        pool: Executor | None,
        prefetch: int | None,
        text: bool = False,
        copy: bool | None = None,
        tenant_column: str | None = None,
    ) -> None:
        """``tenant_column``: the column every statement filters on, equal to the last of
        ``args`` (the run's tenant, appended by ``keyset()``)."""
        self.key = key
        self.copy = copy
        self._relation = relation
        self._where = where
        self._tenant_column = tenant_column
        self._text = text
        self._copy_statements: KeysetStatements | None = None
        self._fitted: int | None = None
        self._sized = False
        self._ahead: deque[tuple[Any, int, asyncio.Future[CsvPage]]] = deque()
        self._next: tuple[Any, int] | None = None
        self._fetch_ahead: tuple[Any, int, asyncio.Future[list[Any]]] | None = None
        self._key_names = (
            tuple(key_name(i) for i in range(len(key))) if text and columns is not None else key
        )
        self.columns = columns
        self._given_pool = pool
        self._args = args
        self._prefetch = prefetch
        self.statements = keyset_statements(
            relation=relation,
            key=key,
            columns=columns,
            where=where,
            n_args=len(args),
            text=text,
            tenant_column=tenant_column,
        )

    async def csv_page(self, after: Any, limit: int, *, fit: int | None = None) -> CsvPage:
        """The page as Postgres writes CSV (``COPY … (FORMAT csv)``), its row count and the
        cursor after it; both statements read one snapshot.

        ``fit`` (bytes): a page bigger than that is read again with fewer rows, sized from the
        row width it showed, and so are the pages after it — the default page size must not
        turn a table of wide rows into an export that cannot finish.

        As soon as a page's bound shows it full, the following page starts on another
        connection (``COPY_AHEAD`` pages at most), so Postgres writes pages N+1 and N+2 on two
        backends while the exporter stores page N: the server's formatting, not the exporter,
        is what a page waits on. Only reads run ahead: a crash loses nothing but them."""
        if fit is not None and self._fitted is not None:
            limit = min(limit, self._fitted)
        page = await self._csv_page(after, limit)
        while fit is not None and len(page.data) > fit and page.rows > 1:
            # Half the bound's worth of rows at the width this page showed.
            self._fitted = max(1, page.rows * fit // (2 * len(page.data)))
            page = await self._csv_page(after, self._fitted)
        if not self._sized:
            # The first page showed how wide a page is (and fits): only now read ahead, so a
            # table of wide rows never has pages of the default size in flight.
            self._sized = True
            if page.rows == page.limit:
                self._follow(page.cursor, page.limit)
        return page

    async def _csv_page(self, after: Any, limit: int) -> CsvPage:
        ahead = self._ahead
        if ahead and ahead[0][0] == after and ahead[0][1] == limit:
            task = ahead.popleft()[2]
            self._resume()
            return await task
        # A retry from another cursor, or another size: what was read ahead is not it.
        while ahead:
            ahead.popleft()[2].cancel()
        self._next = None
        return await self._read_csv_page(after, limit)

    def _follow(self, cursor: Any, limit: int) -> None:
        """A read's bound showed its page full: read the page after it too, or note it when
        ``COPY_AHEAD`` pages are already on their way."""
        if len(self._ahead) >= COPY_AHEAD:
            self._next = (cursor, limit)
            return
        task = asyncio.ensure_future(self._read_csv_page(cursor, limit))
        task.add_done_callback(_retrieved)
        self._ahead.append((cursor, limit, task))

    def _resume(self) -> None:
        if self._next is not None:
            cursor, limit = self._next
            self._next = None
            self._follow(cursor, limit)

    async def _read_csv_page(self, after: Any, limit: int) -> CsvPage:
        lower = () if after is None else tuple(decode_cursor(after))
        async with (
            self._pool().acquire() as conn,
            conn.transaction(isolation="repeatable_read", readonly=True),
        ):
            await conn.execute(CSV_SETTINGS)
            sql = await self._copy_sql(conn)
            bound = sql.bound_first if after is None else sql.bound_after
            last = await conn.fetchrow(bound, *self._args, *lower, limit)
            if last is None or last["_keyset_rows"] == 0:
                return CsvPage(data=b"", rows=0, cursor=after, limit=limit)
            upper = tuple(last[key_name(i)] for i in range(len(self.key)))
            rows = int(last["_keyset_rows"])
            cursor = encode_cursor(upper)
            if rows == limit and self._sized:
                self._follow(cursor, limit)
            held: list[bytes] = []

            async def collect(chunk: bytes) -> None:
                held.append(chunk)

            copy = sql.range_first if after is None else sql.range_after
            await conn.copy_from_query(
                copy, *self._args, *lower, *upper, output=collect, format="csv"
            )
        return CsvPage(data=b"".join(held), rows=rows, cursor=cursor, limit=limit)

    async def _copy_sql(self, conn: Any) -> KeysetStatements:
        """The statements whose COPY neutralises every column that is not a number, a truth
        value, a UUID, a date or a time, and whose bound takes a single key's max() where it
        has one (read once from the columns' types)."""
        if self._copy_statements is None:
            described = await conn.prepare(self.statements.range_first)
            types = {
                a.name: a.type.name
                for a in described.get_attributes()
                if a.type.schema == "pg_catalog"
            }
            columns = self.columns or ()
            self._copy_statements = keyset_statements(
                relation=self._relation,
                key=self.key,
                columns=self.columns,
                where=self._where,
                n_args=len(self._args),
                text=self._text,
                tenant_column=self._tenant_column,
                neutralise=frozenset(c for c in columns if types.get(c) not in PLAIN_TYPES),
                max_bound=len(self.key) == 1 and types.get(self.key[0]) in MAX_TYPES,
            )
        return self._copy_statements

    async def rows(self, after: Any, limit: int) -> AsyncIterator[Any]:
        async for chunk in self.chunks(after, limit):
            for record in chunk:
                yield record

    async def chunks(self, after: Any, limit: int) -> AsyncIterator[list[Any]]:
        """The page as one fetch, or (``prefetch``) as the cursor's fetches of that size."""
        if self._prefetch is None:
            yield await self._fetched_page(after, limit)
            return
        sql, args = self._page_statement(after, limit)
        async with self._pool().acquire() as conn, conn.transaction(readonly=True):
            cursor = await conn.cursor(sql, *args)
            while chunk := await cursor.fetch(self._prefetch):
                yield chunk

    async def _fetched_page(self, after: Any, limit: int) -> list[Any]:
        """One ``fetch`` of the page. A full page starts fetching the next one on another
        connection before it answers, so Postgres reads and sends page N+1 while the exporter
        encodes and stores page N (as ``csv_page`` does). Only a read runs ahead: a crash
        loses nothing but that read, and a page asked from another cursor drops it."""
        ahead = self._fetch_ahead
        self._fetch_ahead = None
        if ahead is not None and ahead[0] == after and ahead[1] == limit:
            page = await ahead[2]
        else:
            if ahead is not None:
                ahead[2].cancel()
            page = await self._fetch(after, limit)
        if len(page) == limit:
            following = self.cursor(page[-1])
            task = asyncio.ensure_future(self._fetch(following, limit))
            task.add_done_callback(_retrieved)
            self._fetch_ahead = (following, limit, task)
        return page

    async def _fetch(self, after: Any, limit: int) -> list[Any]:
        sql, args = self._page_statement(after, limit)
        async with self._pool().acquire() as conn:
            page: list[Any] = await conn.fetch(sql, *args)
        return page

    def _page_statement(self, after: Any, limit: int) -> tuple[str, tuple[Any, ...]]:
        if after is None:
            return self.statements.first, (*self._args, limit)
        return self.statements.after, (*self._args, *decode_cursor(after), limit)

    def cursor(self, row: Any) -> Any:
        return encode_cursor([row[k] for k in self._key_names])

    def _pool(self) -> Executor:
        """``pool=``, else the library's own (read when a page is, inside the service)."""
        if self._given_pool is not None:
            return self._given_pool
        found: Executor = library_pool()
        return found


def _retrieved(task: asyncio.Future[Any]) -> None:
    # A read ahead nobody awaits (the export failed meanwhile) must not log "never retrieved".
    if not task.cancelled():
        task.exception()


def keyset(
    table_or_query: str,
    *,
    key: str | Sequence[str],
    pool: Executor | None = None,
    columns: Sequence[str] | None = None,
    where: str | None = None,
    args: Sequence[Any] = (),
    prefetch: int | None = None,
    text: bool = False,
    copy: bool | None = None,
    tenant_column: str | None = None,
    tenant_free: bool = False,
) -> KeysetSource:
    """Read ``table_or_query`` (a table name, optionally schema-qualified, or a SELECT) in
    pages ordered by ``key``; ``columns`` picks the columns (every one when None, which
    ``export_rows`` then checks row by row against its own ``columns``). ``copy``: None lets a
    CSV export without ``row()`` over the same columns have Postgres write its pages, True
    insists, False always reads decoded rows (``prefetch`` and ``text`` shape those).
    ``pool``: where the rows are; without it, the library's own pool on ``DATABASE_URL``
    (``ujobs.exports.library_pool``), read when the first page is.

    Exactly one of ``tenant_column`` (the column of each row's tenant: only the acting
    tenant's rows are read) and ``tenant_free=True`` (the rows belong to no tenant) is
    required; see the module's docstring."""
    tenancy = _tenancy(table_or_query, tenant_column, tenant_free)
    keys = (key,) if isinstance(key, str) else tuple(key)
    if not keys:
        raise InvariantError("keyset() needs a key: a unique column, or columns unique together")
    for k in keys:
        quote_ident(k)
    cols = None if columns is None else tuple(columns)
    if cols is not None:
        for c in cols:
            quote_ident(c)
        missing = [k for k in keys if k not in cols]
        if missing:
            raise InvariantError(
                f"keyset(): columns must include the key {missing!r}; the cursor is read from it",
                meta={"missing": missing},
            )
    written = table_or_query.strip()
    relation = (
        f"({written})"
        if any(ch.isspace() for ch in written)
        else quote_ident(written, qualified=True)
    )
    if (text or copy) and cols is None:
        raise InvariantError("keyset(text=True / copy=True) needs columns: it names each one")
    if copy is not None and not isinstance(copy, bool):
        raise InvariantError(f"copy must be True, False or None, got {copy!r}")
    if prefetch is not None and (isinstance(prefetch, bool) or prefetch < 1):
        raise InvariantError(f"prefetch must be a positive number of rows, got {prefetch!r}")
    return KeysetSource(
        relation=relation,
        key=keys,
        columns=cols,
        where=where,
        args=tuple(args) if tenancy is None else (*args, tenancy[1]),
        pool=pool,
        prefetch=prefetch,
        text=text,
        copy=copy,
        tenant_column=None if tenancy is None else tenancy[0],
    )


def _tenancy(relation: str, tenant_column: str | None, tenant_free: bool) -> tuple[str, str] | None:
    """The tenant filter a source applies — its column and the acting tenant — or None (rows
    of no tenant, or every tenant's inside ``cross_tenant()``); refuses an undeclared one."""
    named = relation.strip()
    shown = named if len(named) <= 60 else named[:57] + "..."
    if not isinstance(tenant_free, bool):
        raise InvariantError(f"tenant_free must be True or False, got {tenant_free!r}")
    if tenant_free and tenant_column is not None:
        raise ExportTenancyUndeclaredError(
            f"keyset({shown!r}) names a tenant column ({tenant_column!r}) and says its rows "
            "belong to no tenant (tenant_free=True); keep the one that is true",
            meta={"source": shown, "add": "tenant_column or tenant_free, not both"},
        )
    if tenant_free:
        return None
    if tenant_column is None:
        raise ExportTenancyUndeclaredError(
            f"keyset({shown!r}) does not say whose rows it reads: add tenant_column='<the "
            "column holding each row's tenant>' (the library then reads only the run's "
            "tenant's rows), or tenant_free=True for rows that belong to no tenant",
            meta={"source": shown, "add": "tenant_column or tenant_free"},
        )
    quote_ident(tenant_column)
    acting = current_tenant()
    if acting is not None:
        return tenant_column, acting
    if cross_tenant_reason() is not None:
        return None
    raise TenancyActorOrgRequiredError(
        f"keyset({shown!r}) reads the rows of one tenant (tenant_column={tenant_column!r}) "
        "and is made under none (an export declared tenant='none'); make it inside "
        "cross_tenant(reason) to read every tenant's rows, written down where it happens",
        meta={"source": shown, "tenant_column": tenant_column},
    )


def encode_cursor(values: Sequence[Any]) -> list[Any]:
    """A key's values as JSON that ``decode_cursor`` turns back into the same types."""
    return [_encode(v) for v in values]


def decode_cursor(stored: Sequence[Any]) -> list[Any]:
    return [_decode(v) for v in stored]


def _encode(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, UUID):
        return {"$uuid": str(value)}
    if isinstance(value, datetime):
        return {"$ts": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if isinstance(value, Decimal):
        return {"$dec": str(value)}
    raise InvariantError(
        f"a keyset key of type {type(value).__name__} cannot be stored as a cursor; key on "
        "an integer, text, UUID, date, timestamp or numeric column",
        meta={"type": type(value).__name__},
    )


_DECODERS: dict[str, Any] = {
    "$uuid": UUID,
    "$ts": datetime.fromisoformat,
    "$date": date.fromisoformat,
    "$dec": Decimal,
}


def _decode(value: Any) -> Any:
    if isinstance(value, dict) and len(value) == 1:
        ((tag, text),) = value.items()
        decoder = _DECODERS.get(tag)
        if decoder is not None:
            return decoder(text)
    return value
