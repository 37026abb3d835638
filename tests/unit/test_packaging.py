"""The wheel ships every package and the SQL: pyproject.toml lists its packages by hand (so the
top-level sql/ folder can ride inside the wheel as ``ujobs._sql``), and a package folder
missing from that list would be missing from every non-editable install."""

from __future__ import annotations

import tomllib
from pathlib import Path

import ujobs.drivers.postgres.sql as sql

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    setuptools = pyproject()["tool"]["setuptools"]  # type: ignore[index]
    listed = set(setuptools["packages"])
    on_disk = {
        ".".join(init.parent.relative_to(ROOT).parts)
        for top in ("shared", "services", "webhooks", "exports")
        for init in (ROOT / top).rglob("__init__.py")
    }
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert setuptools["package-dir"]["ujobs._sql"] == "sql"


def test_the_wheel_globs_cover_every_sql_file() -> None:
    globs = pyproject()["tool"]["setuptools"]["package-data"]["ujobs._sql"]  # type: ignore[index]
    shipped = {p for g in globs for p in (ROOT / "sql").glob(g)}
    every = {p for p in (ROOT / "sql").rglob("*") if p.is_file()}
    assert every == shipped


def test_a_checkout_reads_its_own_sql_folder() -> None:
    assert sql.SQL_ROOT == ROOT / "sql"
    assert len(sql.QUERIES) == len(list((ROOT / "sql/queries").glob("*.sql")))
