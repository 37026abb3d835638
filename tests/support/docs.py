"""Read the documentation the tests hold to its word: a page of the site in docs/, a section of
it, its code blocks, a block after a ``<!-- marker -->`` comment.

The snippets a user copies live on these pages, so the tests run them from there: a page that
moves or loses its block fails here, by name, instead of a test silently running nothing.
"""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"


def page(name: str) -> str:
    """The Markdown of ``docs/<name>`` (e.g. ``guides/exports.md``)."""
    return (DOCS / name).read_text(encoding="utf-8")


def pages() -> dict[str, str]:
    """Every page of the site by its name under docs/, and the README as ``README.md``."""
    found = {str(p.relative_to(DOCS)): p.read_text(encoding="utf-8") for p in DOCS.rglob("*.md")}
    found["README.md"] = (ROOT / "README.md").read_text(encoding="utf-8")
    return dict(sorted(found.items()))


def section(text: str, heading: str) -> str:
    """The text under ``## <heading>`` up to the next ``## `` heading (or the page's end)."""
    marker = f"\n## {heading}\n"
    assert marker in text, f"no section {heading!r}"
    return text.split(marker, 1)[1].split("\n## ", 1)[0]


def blocks(text: str, language: str) -> list[str]:
    """Every fenced block of ``language`` (```` ```python ````), in order, without its fences."""
    return re.findall(rf"^```{re.escape(language)}\n(.*?)^```", text, flags=re.M | re.S)


def first_block(text: str, language: str) -> str:
    found = blocks(text, language)
    assert found, f"no ```{language} block"
    return found[0]


def marked_block(text: str, marker: str) -> str:
    """The fenced block right after ``<!-- marker -->``, without its fences."""
    found = re.search(rf"<!-- {re.escape(marker)} -->\n```\w*\n(.*?)^```", text, flags=re.M | re.S)
    assert found, f"no block marked <!-- {marker} -->"
    return found.group(1)


def module_of(code: str, name: str) -> types.ModuleType:
    """``code`` run as the module ``name``, as Python imports a pasted file (so a snippet's
    ``define_api(jobs=[sys.modules[__name__]])`` finds itself); not left in ``sys.modules``."""
    module = types.ModuleType(name)
    sys.modules[name] = module
    try:
        exec(compile(code, f"<{name}>", "exec"), module.__dict__)
    finally:
        del sys.modules[name]
    return module
