"""``broken_export``: an export whose source is refused at its first page (a ``keyset()`` that
names a tenant column and says its rows belong to no tenant: ``X_EXPORT_TENANCY_UNDECLARED``,
terminal), so its first attempt dead-letters it: what a dead export answers, to its tenant and
to an operator."""

from __future__ import annotations

from typing import Any

from ujobs import Run, t
from ujobs.exports import export_rows, keyset


def contradictory(run: Run[Any]) -> Any:
    return keyset("orders", key="id", columns=["id"], tenant_column="org_id", tenant_free=True)


broken_export = export_rows(
    name="broken.export",
    input=t.object(org_id=t.string, export_id=t.string),
    tenant=lambda i: i.org_id,
    prefix=lambda i: f"exports/{i.org_id}/broken/{i.export_id}",
    source=contradictory,
    columns=["id"],
)
