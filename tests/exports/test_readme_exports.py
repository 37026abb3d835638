"""The README's export section declares what it says it declares."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from exports.family import export_of

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def test_the_exporting_data_snippet_declares_an_export_on_the_exports_queue() -> None:
    section = README.split("## Exporting data", 1)[1].split("\n## ", 1)[0]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict[str, Any] = {}
    exec(code, namespace)
    handle = namespace["export_orders"]
    assert handle.queue == "exports"
    spec = export_of(handle)
    assert spec is not None
    assert spec.columns == ("id", "placed_at", "total")
    assert spec.prefix_for(handle.parse_input({"org_id": "o", "export_id": "e"})) == "exports/o/e"
    assert "## Downloading an export" in README
