"""The named statements under ``sql/queries/``, loaded once at import.

Every statement the Postgres driver, its stores and the event bus run is a file
``sql/queries/<name>.sql`` holding one statement, so a person debugging a stuck queue can read
(and run) the exact text. Python never builds SQL: it asks for a statement by name.
``query()`` refuses a name with no file, so a typo fails at import of the module that asked,
not at the first call.
"""

from __future__ import annotations

from pathlib import Path

from ujobs.errors import InvariantError


def _sql_root() -> Path:
    """``sql/`` beside the packages in a checkout (and an editable install); ``shared/_sql``
    in an installed wheel, which ships the same folder under that name (see pyproject.toml)."""
    shared = Path(__file__).resolve().parents[2]
    checkout = shared.parent / "sql"
    return checkout if checkout.is_dir() else shared / "_sql"


SQL_ROOT = _sql_root()
QUERIES_DIR = SQL_ROOT / "queries"
MIGRATIONS_DIR = SQL_ROOT / "migrations"


def _load(directory: Path) -> dict[str, str]:
    if not directory.is_dir():
        raise InvariantError(
            f"the SQL folder {directory} is missing; run from a checkout or an install that "
            "ships sql/",
            meta={"path": str(directory)},
        )
    return {path.stem: path.read_text(encoding="utf-8") for path in sorted(directory.glob("*.sql"))}


QUERIES: dict[str, str] = _load(QUERIES_DIR)


def query(name: str) -> str:
    """The text of the named statement; an unknown name is ``X_INVARIANT``."""
    text = QUERIES.get(name)
    if text is None:
        raise InvariantError(f"no statement named {name!r} in {QUERIES_DIR}", meta={"query": name})
    return text


def migration_files() -> list[tuple[str, str]]:
    """``(id, text)`` of every migration, in the order they apply (their file names sort)."""
    return sorted(_load(MIGRATIONS_DIR).items())
