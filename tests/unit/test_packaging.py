"""The wheel ships every package and the SQL: pyproject.toml lists its packages by hand (so the
top-level sql/ folder can ride inside the wheel as ``ujobs._sql``), and a package folder
missing from that list would be missing from every non-editable install."""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

import ujobs.drivers.postgres.sql as sql

ROOT = Path(__file__).resolve().parents[2]


def pyproject() -> dict[str, object]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def test_every_package_folder_is_listed_for_the_wheel() -> None:
    setuptools = pyproject()["tool"]["setuptools"]  # type: ignore[index]
    listed = set(setuptools["packages"])
    on_disk = {_installed_name(init.parent) for init in _package_inits()}
    assert on_disk <= listed, f"add to [tool.setuptools] packages: {sorted(on_disk - listed)}"
    assert setuptools["package-dir"]["ujobs._sql"] == "sql"


FOLDERS = {"shared": "ujobs", "services": "ujobs.services", "webhooks": "ujobs.webhooks"}
FOLDERS["exports"] = "ujobs.exports"


def _package_inits() -> list[Path]:
    return [init for top in FOLDERS for init in (ROOT / top).rglob("__init__.py")]


def _installed_name(path: Path) -> str:
    """The import name of a folder or module of the checkout: its top folder's ``ujobs`` name."""
    top, *rest = path.relative_to(ROOT).with_suffix("").parts
    if rest and rest[-1] == "__init__":
        rest = rest[:-1]
    return ".".join((FOLDERS[top], *rest))


def test_every_module_of_the_checkout_is_importable_as_ujobs() -> None:
    """An editable install is a tree of links made at install time: a module added since is not
    in it until ``pip install -e .`` runs again (this names which)."""
    modules = [
        p
        for top in FOLDERS
        for p in (ROOT / top).rglob("*.py")
        if (p.parent / "__init__.py").exists()
    ]
    missing = [
        _installed_name(p) for p in modules if importlib.util.find_spec(_installed_name(p)) is None
    ]
    assert not missing, f"not installed (run `pip install -e .` again): {missing}"


def test_the_wheel_globs_cover_every_sql_file() -> None:
    globs = pyproject()["tool"]["setuptools"]["package-data"]["ujobs._sql"]  # type: ignore[index]
    shipped = {p for g in globs for p in (ROOT / "sql").glob(g)}
    every = {p for p in (ROOT / "sql").rglob("*") if p.is_file()}
    assert every == shipped


def test_a_checkout_reads_its_own_sql_folder() -> None:
    assert sql.SQL_ROOT == ROOT / "sql"
    assert len(sql.QUERIES) == len(list((ROOT / "sql/queries").glob("*.sql")))
