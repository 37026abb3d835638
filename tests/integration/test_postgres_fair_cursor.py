"""The fair claim's cursor row (``x_fair_cursors``, the ``moved`` step of ``claim.sql`` and
``claim_slots.sql``): it moves to the tenant of the last fair row handed out, and a claim that
leaves it where it was writes no new version of it (a queue of one tenant, most, would
otherwise rewrite it on every claim)."""

from __future__ import annotations

from typing import Any

import asyncpg

from tests.support.conformance import req
from tests.support.plans import fresh_jobs_table
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres.driver import PostgresDriver


async def _cursor(pool: asyncpg.Pool[Any]) -> tuple[str, str]:
    """The default queue's cursor and its row version (``xmin``: a new one for each write)."""
    row = await pool.fetchrow(
        "select tenant, xmin::text as version from x_fair_cursors where queue = 'default'"
    )
    assert row is not None
    return row["tenant"], row["version"]


async def test_the_cursor_moves_with_the_tenants_and_is_not_rewritten_in_place(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    await fresh_jobs_table(pg_pool)
    await pg_pool.execute("delete from x_fair_cursors")
    await pg.enqueue_many([req(key=f"a{i}", tenant_id="acme") for i in range(4)])
    claim = ClaimOptions(queues=("default",), limit=1, worker_id="w")

    assert len(await pg.claim(claim)) == 1
    tenant, version = await _cursor(pg_pool)
    assert tenant == "acme"
    for _ in range(2):  # one tenant: the cursor stays on it, and its row is not written again
        assert len(await pg.claim(claim)) == 1
        assert await _cursor(pg_pool) == (tenant, version)

    await pg.enqueue_many([req(key="b0", tenant_id="bolt")])
    assert [job.tenant_id for job in await pg.claim(claim)] == ["bolt"]
    moved, moved_version = await _cursor(pg_pool)
    assert moved == "bolt"
    assert moved_version != version
