"""Four backfills: one plain, one gated on a migration and two environments, one that fails
its gate wherever UJOBS_ENVIRONMENT is unset, and one scoped to an org (a pass per tenant),
declared for the ``tenancy`` environment only so the others' tests see it excluded."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ujobs.backfill import KeysetSource, backfill, keyset
from ujobs.context import current_tenant

LEFT = {"rows": 42}
LEFT_BY_ORG = {"org_1": 5, "org_a": 0, "org_b": 3}
"""What ``per-org``'s ``count`` answers, by the org of the actor it is called under (as a pass
calls it: under its tenant's actor); another actor's count is no whole number."""


def _left_in_org(_ctx: Any) -> Any:
    return LEFT_BY_ORG.get(current_tenant() or "", "no org")


def _source(_ctx: Any) -> KeysetSource:
    async def fetch(after: Any, limit: int) -> list[dict[str, Any]]:
        return []

    return keyset(fetch)


async def _handle(rows: Sequence[Any], signal: Any) -> None:
    return None


rewrite_slugs = backfill(
    name="rewrite-slugs",
    tenant="none",
    source=_source,
    handle=_handle,
    count=lambda _ctx: LEFT["rows"],
)

drop_legacy = backfill(
    name="drop-legacy",
    tenant="none",
    requires="20260814120000_add_publish_at",
    environments=["staging", "production"],
    source=_source,
    handle=_handle,
)

prod_only = backfill(
    name="prod-only",
    tenant="none",
    environments=["production"],
    source=_source,
    handle=_handle,
)

per_org = backfill(
    name="per-org",
    tenant=lambda _input: "org_1",
    environments=["tenancy"],
    source=_source,
    handle=_handle,
    count=_left_in_org,
)
