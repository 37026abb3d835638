"""``services/`` stays folded: packages by purpose, each ``__init__`` docstring its map, no
module named after a sibling package (``api_*`` beside ``api/``), and no import circle — neither
between modules (counting only the imports a module runs when it is imported) nor between its
packages (the api's assembly, which mounts the dashboard and the NATS edge, aside)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SERVICES = ROOT / "services"
PACKAGES = sorted(p.parent for p in SERVICES.rglob("__init__.py"))


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(["ujobs", *parts])


MODULES = {_module_name(p): p for p in SERVICES.rglob("*.py")}


def _import_time_statements(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The statements run at import: the module's own, not a function's, not TYPE_CHECKING's."""
    for node in body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            yield from _import_time_statements(node.orelse)
        elif isinstance(node, ast.If | ast.Try):
            yield from _import_time_statements(node.body)
            yield from _import_time_statements(getattr(node, "orelse", []))
        elif not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in _import_time_statements(ast.parse(path.read_text(encoding="utf-8")).body):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name in MODULES}


GRAPH = {name: _imports(path) - {name} for name, path in MODULES.items()}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt) :], nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_no_module_of_services_imports_itself_back_through_a_circle() -> None:
    cycle = _cycle(GRAPH)
    assert cycle is None, "import circle: " + " -> ".join(cycle or [])


def _package_of(module: str) -> str:
    """``ujobs.services.api`` for every module of ``services/api/``; a role module is its own."""
    parts = module.split(".")
    return ".".join(parts[:3])


# The api's assembly (``api.app``: ``create_app`` and the service's start) mounts the dashboard
# and the NATS edge, which are built on the api's keys and auth; it is the top of the process and
# nothing imports it, so its edges are left out of the packages' graph.
ASSEMBLY = "ujobs.services.api.app"


def test_no_package_of_services_depends_on_another_that_depends_back() -> None:
    graph: dict[str, set[str]] = {}
    for module, deps in GRAPH.items():
        assert ASSEMBLY not in deps, f"{module} imports {ASSEMBLY}, the top of the api process"
        if module == ASSEMBLY:
            continue
        own = _package_of(module)
        graph.setdefault(own, set()).update(_package_of(d) for d in deps if _package_of(d) != own)
    cycle = _cycle(graph)
    assert cycle is None, "package circle: " + " -> ".join(cycle or [])


def test_no_module_is_named_after_a_sibling_package() -> None:
    offenders = [
        str(module.relative_to(ROOT))
        for package in PACKAGES
        for module in package.glob("*.py")
        for sibling in package.iterdir()
        if (sibling / "__init__.py").exists() and module.stem.startswith(sibling.name + "_")
    ]
    assert not offenders, f"fold these into their package: {offenders}"


@pytest.mark.parametrize("package", PACKAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_package_docstring_names_every_module_in_it(package: Path) -> None:
    doc = ast.get_docstring(ast.parse((package / "__init__.py").read_text(encoding="utf-8")))
    assert doc, f"{package.relative_to(ROOT)}/__init__.py has no docstring (its map)"
    members = [p.stem for p in package.glob("*.py") if p.stem not in ("__init__", "__main__")]
    members += [p.name for p in package.iterdir() if (p / "__init__.py").exists()]
    missing = [m for m in sorted(members) if f"``{m}``" not in doc]
    assert not missing, f"{package.relative_to(ROOT)}/__init__.py's map misses {missing}"
