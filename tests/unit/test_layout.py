"""The tree shows the architecture and stays importable: each package's ``__init__`` docstring
is its map (it names every module and sub-package in it), and code inside ``ujobs`` (the shared/
folder) imports leaf modules, never a package's ``__init__``, so no import cycle can form through
one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ujobs

SHARED = Path(ujobs.__file__).resolve().parent
PACKAGES = sorted(p.parent for p in SHARED.rglob("__init__.py"))


def _dotted(path: Path) -> str:
    return ".".join(("ujobs", *path.relative_to(SHARED).parts))


PACKAGE_NAMES = {_dotted(p) if p != SHARED else "ujobs" for p in PACKAGES}


def _imports_of(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
    return found


MODULES = sorted(SHARED.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=lambda p: str(p.relative_to(SHARED.parent)))
def test_shared_imports_leaf_modules_never_a_package(path: Path) -> None:
    own_package = _dotted(path.parent) if path.parent != SHARED else "ujobs"
    through_a_package = [
        f"line {line}: {module}"
        for line, module in _imports_of(path)
        if module in PACKAGE_NAMES and not (path.name == "__init__.py" and module == own_package)
    ]
    assert not through_a_package, (
        f"{path.relative_to(SHARED.parent)} imports a package __init__ (import the module that "
        f"defines the name instead): {through_a_package}"
    )


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(SHARED.parent)))
def test_each_package_docstring_names_every_module_in_it(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.relative_to(SHARED.parent)}/__init__.py has no docstring (its map)"
    members = sorted(
        [p.stem for p in package.glob("*.py") if p.name != "__init__.py"]
        + [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    )
    unnamed = [m for m in members if f"``{m}``" not in doc]
    assert not unnamed, f"the map of {_dotted(package)} does not name {unnamed}"
