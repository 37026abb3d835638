"""The statements ``keyset()`` sends, composed from named templates.

A keyset read runs over the caller's table or query, so its statements cannot live in
``sql/queries`` beside ours; they are composed here, once per source, from the templates below,
identifiers that are checked and double-quoted, and the ``where`` fragment the caller wrote.
Every value travels as a parameter: the ``where`` arguments first (``$1``…), then the run's
tenant when the source names its tenant column (the library's filter, ANDed with ``where``),
then the cursor's, then the page's upper bound or limit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ujobs.errors import InvariantError

__all__ = [
    "CSV_SETTINGS",
    "MAX_TYPES",
    "PLAIN_TYPES",
    "KeysetStatements",
    "keyset_statements",
    "quote_ident",
]

# One page after the cursor (or the first page), in key order.
PAGE = "SELECT {select} FROM {relation} AS _keyset WHERE {filter} ORDER BY {keys} LIMIT {limit}"
PAGE_AFTER = (
    "SELECT {select} FROM {relation} AS _keyset WHERE {filter} AND ({keys}) > ({after}) "
    "ORDER BY {keys} LIMIT {limit}"
)
# The COPY road: the last key and the size of the page a PAGE(_AFTER) of keys would answer ...
BOUND = (
    "SELECT {last}, count(*) OVER () AS _keyset_rows FROM ({page}) AS _page "
    "ORDER BY {backwards} LIMIT 1"
)
# ... or, for one key of a type with max(), the same in one pass, without a window over the
# page and a sort of it.
BOUND_MAX = "SELECT max({key}) AS {name}, count(*) AS _keyset_rows FROM ({page}) AS _page"
# ... then exactly that key range, for COPY.
RANGE = (
    "SELECT {select} FROM {relation} AS _keyset WHERE {filter} AND ({keys}) <= ({upper}) "
    "ORDER BY {keys}"
)
RANGE_AFTER = (
    "SELECT {select} FROM {relation} AS _keyset WHERE {filter} AND ({keys}) > ({after}) "
    "AND ({keys}) <= ({upper}) ORDER BY {keys}"
)

# The forms a COPY page writes, whatever the server's or the pool's defaults: timestamps in UTC
# (as asyncpg decodes them for the rows road), ISO dates, and the shortest exact floats.
CSV_SETTINGS = (
    "SET LOCAL TimeZone = 'UTC'; SET LOCAL DateStyle = 'ISO, MDY'; "
    "SET LOCAL IntervalStyle = 'postgres'; SET LOCAL extra_float_digits = 1"
)
# A cell neutralised by Postgres as ``ujobs.exports.encoders.neutralise`` does it in Python: a ``'``
# in front when it leads with a formula character (also behind spaces and quotes), unless it
# is a plain negative number. ``ascii()`` reads the first character without a copy, so a cell
# that cannot lead with one costs a single comparison.
NEUTRALISED = (
    "CASE WHEN ascii({cell}) IN (9, 10, 13, 32, 34, 39, 43, 45, 61, 64) "
    "AND ascii(ltrim({cell}, ' \"''')) IN (9, 10, 13, 43, 45, 61, 64) "
    "AND (ascii({cell}) <> 45 OR {cell} !~ "
    "'^-(?:[0-9]+(?:[.][0-9]*)?|[.][0-9]+)(?:[eE][+-]?[0-9]+)?$') "
    "THEN '''' || {cell} ELSE {cell} END AS {name}"
)
# Key types (in pg_catalog) with a max() that orders as the key's ORDER BY does.
MAX_TYPES = frozenset(
    {"int2", "int4", "int8", "numeric", "text", "varchar", "date", "timestamp", "timestamptz"}
)

# Types (in pg_catalog) whose text needs no neutralising: numbers (a negative one is a plain
# negative number), truth values, UUIDs, dates and times. Every other column (text, json,
# enums, domains, …) goes through NEUTRALISED, as the rows road neutralises every string.
PLAIN_TYPES = frozenset(
    {
        "int2", "int4", "int8", "oid", "float4", "float8", "numeric", "bool", "uuid",
        "date", "time", "timetz", "timestamp", "timestamptz",
    }
)  # fmt: skip

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")


def quote_ident(name: str, *, qualified: bool = False) -> str:
    """``name`` double-quoted, refused unless it is a plain (optionally schema-qualified)
    identifier."""
    parts = name.split(".") if qualified else [name]
    if not all(_IDENT.fullmatch(p) for p in parts) or len(parts) > 2:
        raise InvariantError(
            f"{name!r} is not a plain identifier (letters, digits, _ and $"
            + (", optionally schema-qualified" if qualified else "")
            + "); quote nothing yourself — keyset() quotes what it is given",
            meta={"identifier": name},
        )
    return ".".join('"' + p + '"' for p in parts)


def _params(first: int, count: int) -> str:
    return ", ".join("$" + str(first + i) for i in range(count))


def key_name(i: int) -> str:
    """The name a typed key column travels under when the columns are read as text."""
    return "_keyset_key_" + str(i)


@dataclass(frozen=True, slots=True)
class KeysetStatements:
    first: str
    after: str
    bound_first: str = ""
    bound_after: str = ""
    range_first: str = ""
    range_after: str = ""


def keyset_statements(
    *,
    relation: str,
    key: tuple[str, ...],
    columns: tuple[str, ...] | None,
    where: str | None,
    n_args: int,
    text: bool,
    tenant_column: str | None = None,
    neutralise: frozenset[str] = frozenset(),
    max_bound: bool = False,
) -> KeysetStatements:
    """The statements of one keyset source (``relation`` already quoted or parenthesised);
    with ``tenant_column``, every statement keeps only the rows whose column equals the last
    of the ``n_args`` parameters (the run's tenant); the COPY ones (when it names its columns)
    neutralise the columns in ``neutralise``, and ``max_bound`` (one key of a ``MAX_TYPES``
    type) bounds a page with ``BOUND_MAX``."""
    k = len(key)
    filters = [] if not where else ["(" + where + ")"]
    if tenant_column is not None:
        filters.append("_keyset." + quote_ident(tenant_column) + " = " + _params(n_args, 1))
    keys = ", ".join("_keyset." + quote_ident(c) for c in key)
    if columns is None:
        select = "*"
    elif text:
        # Every column as Postgres writes it; the key also typed, under its own name, so the
        # cursor keeps the key's type.
        select = ", ".join(
            ["_keyset." + quote_ident(c) + "::text AS " + quote_ident(c) for c in columns]
            + ["_keyset." + quote_ident(c) + " AS " + key_name(i) for i, c in enumerate(key)]
        )
    else:
        select = ", ".join(quote_ident(c) for c in columns)
    parts = {
        "relation": relation,
        "filter": " AND ".join(filters) if filters else "true",
        "keys": keys,
        "after": _params(n_args + 1, k),
    }
    statements = KeysetStatements(
        first=PAGE.format(select=select, limit=_params(n_args + 1, 1), **parts),
        after=PAGE_AFTER.format(select=select, limit=_params(n_args + k + 1, 1), **parts),
    )
    if columns is None:
        return statements
    last = ", ".join("_page." + quote_ident(c) + " AS " + key_name(i) for i, c in enumerate(key))
    backwards = ", ".join("_page." + quote_ident(c) + " DESC" for c in key)
    key_pages = (
        PAGE.format(select=keys, limit=_params(n_args + 1, 1), **parts),
        PAGE_AFTER.format(select=keys, limit=_params(n_args + k + 1, 1), **parts),
    )
    listed = ", ".join(_copied(c, c in neutralise) for c in columns)

    def bound(page: str) -> str:
        if max_bound and k == 1:
            return BOUND_MAX.format(key="_page." + quote_ident(key[0]), name=key_name(0), page=page)
        return BOUND.format(last=last, page=page, backwards=backwards)

    return KeysetStatements(
        first=statements.first,
        after=statements.after,
        bound_first=bound(key_pages[0]),
        bound_after=bound(key_pages[1]),
        range_first=RANGE.format(select=listed, upper=_params(n_args + 1, k), **parts),
        range_after=RANGE_AFTER.format(select=listed, upper=_params(n_args + k + 1, k), **parts),
    )


def _copied(column: str, neutralised: bool) -> str:
    cell = "_keyset." + quote_ident(column)
    if not neutralised:
        return cell
    return NEUTRALISED.format(cell=cell + "::text", name=quote_ident(column))
