"""Tenant weights in ``x_tenant_weights`` (``TenantWeights``): the fair claim reads the table
in its own statement (sql/queries/claim.sql), so a weight set here counts from the next claim
of every worker, without a restart."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ujobs.drivers.fairness import check_tenant, check_weight
from ujobs.drivers.postgres.pooled import pooled
from ujobs.drivers.postgres.sql import query

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

_WEIGHT = query("tenant_weight")
_SET = query("tenant_weight_set")

OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "weight": ("tenant_weight",),
    "set_weight": ("tenant_weight_set",),
}


class PostgresWeights:
    """``TenantWeights`` over the driver's pool."""

    def __init__(self, pool: Pool) -> None:
        self._pool = pool

    async def weight(self, tenant_id: str) -> int:
        tenant = check_tenant(tenant_id)
        async with pooled(self._pool) as conn:
            return int(await conn.fetchval(_WEIGHT, tenant))

    async def set_weight(self, tenant_id: str, weight: int) -> int:
        tenant, checked = check_tenant(tenant_id), check_weight(weight)
        async with pooled(self._pool) as conn:
            return int(await conn.fetchval(_SET, tenant, checked))


__all__ = ["OPERATION_QUERIES", "PostgresWeights"]
