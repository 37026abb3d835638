"""A job as permissive as an author may write one: ``t.any`` data, the caller's tenant and key."""

from __future__ import annotations

from typing import Any

from ujobs import Run, job, t


@job(
    name="open.input",
    input=t.object(tenant=t.string, key=t.string, data=t.optional(t.any)),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: i.tenant,
)
async def open_input(run: Run[Any]) -> None:
    """Accept whatever ``data`` holds."""
