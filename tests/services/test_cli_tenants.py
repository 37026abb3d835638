"""``ujobs tenants weight <tenant> [<n>]``: reads a tenant's weight (1 by default), sets one
(1..1000) that the next claim reads, and refuses a bad one with its X_ code."""

from __future__ import annotations

from tests.support.cli import json_of, ujobs, with_driver
from ujobs.drivers.base import ClaimOptions, EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver


def test_read_set_and_the_next_claim_honours_it(pg_dsn: str) -> None:
    assert json_of(ujobs("tenants", "weight", "acme", "--json", dsn=pg_dsn)) == {
        "tenantId": "acme",
        "weight": 1,
    }
    set_ = ujobs("tenants", "weight", "acme", "3", dsn=pg_dsn)
    assert set_.exit_code == 0, set_.output
    assert set_.stdout.strip() == "acme: weight 3"

    async def work(driver: PostgresDriver) -> dict[str | None, int]:
        for tenant in ("acme", "other"):
            await driver.enqueue_many(
                [
                    EnqueueRequest(
                        name="j", input={}, idempotency_key=f"{tenant}{n}", tenant_id=tenant
                    )
                    for n in range(10)
                ]
            )
        got = await driver.claim(ClaimOptions(["default"], 8, "w"))
        counts: dict[str | None, int] = {}
        for job in got:
            counts[job.tenant_id] = counts.get(job.tenant_id, 0) + 1
        return counts

    assert with_driver(pg_dsn, work) == {"acme": 6, "other": 2}


def test_a_bad_weight_or_tenant_is_refused_with_its_code(pg_dsn: str) -> None:
    for args in (("acme", "0"), ("acme", "1001"), ("t" * 201,)):
        result = ujobs("tenants", "weight", *args, "--json", dsn=pg_dsn)
        assert result.exit_code == 1, result.output
        assert "X_INPUT_INVALID" in result.output
