"""The Redis driver's own share of "a runId is a namespace of its tenant": the ack that lets a
done run's steps expire touches only its tenant's steps hash (issue 34, item 1)."""

from __future__ import annotations

from tests.support.redis_keys import redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest, NackOptions

RUN = "order-42"


async def test_acking_b_s_run_never_expires_a_s_steps(redis_url: str, redis_prefix: str) -> None:
    clock = FrozenClock(1_700_000_000_000)
    async with redis_test_driver(redis_url, redis_prefix, clock=clock, done_ttl_ms=60_000) as drv:
        for tenant in ("org-a", "org-b"):
            request = EnqueueRequest(
                name="quote", input={}, idempotency_key=tenant, tenant_id=tenant, run_id=RUN
            )
            await drv.enqueue(request)
            [job] = await drv.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
            assert await drv.save_step(job.id, job.ref, RUN, "quote", tenant, started_at_ms=1)
            if tenant == "org-a":  # A's run is kept (dead); B's is done and expires
                assert await drv.nack(job.id, job.ref, NackOptions(dead_letter=True))
            else:
                assert await drv.ack(job.id, job.ref)
        tag = drv.hash_tag
        a_steps = f"{tag}:tsteps:5:org-a:{RUN}"
        b_steps = f"{tag}:tsteps:5:org-b:{RUN}"
        assert await drv.client.pttl(a_steps) == -1
        assert 0 < await drv.client.pttl(b_steps) <= 60_000
        assert not await drv.client.exists(f"{tag}:steps:{RUN}")
        assert [s.output for s in await drv.load_steps(RUN, tenant_id="org-a")] == ["org-a"]
