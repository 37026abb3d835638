"""The documentation site cannot drift from the code: the generated reference pages are what
docs/gen_reference.py makes of the code now, and every page is reachable from the site's nav."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

import pytest
import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML)

from docs.gen_reference import COMMAND, ROOT, pages
from tests.support.docs import DOCS, page
from ujobs import errors

GENERATED = pages()


@pytest.mark.parametrize("path", sorted(GENERATED), ids=str)
def test_each_generated_page_is_checked_in_as_generated(path: Path) -> None:
    target = ROOT / path
    assert target.is_file(), f"{path} is missing: run `{COMMAND}` and commit the page"
    checked_in = target.read_text(encoding="utf-8")
    drift = difflib.unified_diff(
        checked_in.splitlines(),
        GENERATED[path].splitlines(),
        "checked in",
        "generated",
        n=0,
        lineterm="",
    )
    assert checked_in == GENERATED[path], (
        f"{path} differs from what the code generates: run `{COMMAND}` and commit the page\n"
        + "\n".join(list(drift)[:20])
    )


def test_the_error_page_lists_every_code_of_the_registry_and_of_the_edges() -> None:
    listed = set(re.findall(r"^\| `(X_[A-Z_]+)` \|", page("reference/errors.md"), flags=re.M))
    declared = {
        value.code
        for value in vars(errors).values()
        if isinstance(value, type) and issubclass(value, errors.UltimateError)
    }
    assert declared <= listed
    assert {"X_UNAUTHORIZED", "X_FORBIDDEN", "X_BODY_TOO_LARGE", "X_EXPORT_NOT_FOUND"} <= listed


def _nav_pages(entries: object) -> list[str]:
    if isinstance(entries, str):
        return [entries]
    if isinstance(entries, list):
        return [p for entry in entries for p in _nav_pages(entry)]
    if isinstance(entries, dict):
        return [p for value in entries.values() for p in _nav_pages(value)]
    return []


def test_every_page_is_in_the_nav_and_every_nav_entry_is_a_page() -> None:
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    in_nav = _nav_pages(config["nav"])
    on_disk = sorted(str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md"))
    assert sorted(in_nav) == on_disk
