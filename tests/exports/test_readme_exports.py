"""The exports guide's snippet declares what the guide says it declares."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support.docs import first_block, module_of, page, section
from ujobs.execution.scope import job_scope
from ujobs.exports.family import export_of
from ujobs.exports.keyset import KeysetSource

GUIDE = page("guides/exports.md")


def test_the_exporting_data_snippet_declares_an_export_on_the_exports_queue() -> None:
    code = first_block(GUIDE, "python")
    snippet = module_of(code, "docs_reports_app")
    handle = snippet.export_orders
    assert snippet.api.jobs == {"orders.export": handle}  # what `ujobs exporter --app` loads
    assert handle.queue == "exports"
    spec = export_of(handle)
    assert spec is not None
    assert spec.columns == ("id", "placed_at", "total")
    value = handle.parse_input({"org_id": "o", "export_id": "e"})
    assert spec.prefix_for(value) == "exports/o/e"
    assert "ujobs exports get ID" in section(GUIDE, "Downloading an export")
    # The source reads the run's tenant's rows only, the library's filter, not the author's.
    run = SimpleNamespace(input=value, ctx=None)  # no pool=: the service's own, no ctx needed
    with job_scope(handle.tenant_for(value), None):
        source = spec.source(run)  # type: ignore[arg-type]
    assert isinstance(source, KeysetSource)
    assert source.statements.first.startswith(
        'SELECT "id", "placed_at", "total" FROM "orders" AS _keyset WHERE _keyset."org_id" = $1 '
    )
