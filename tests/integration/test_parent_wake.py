"""A parent its last child's settle makes due is announced on the Redis wake.

Why: the settle told only this process's workers (and LISTEN workers, through the statement's
``pg_notify``). In a fleet on the Redis wake where the process that ran the last child does not
serve the parent's queue, the parent waited for a worker's idle poll. The Postgres driver now
calls its ``on_parent_woken`` callbacks, and ``announcing()`` registers the publish there: for
the ack of a last child that completed and for the nack of one that failed.
"""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.support.children import due, parent, run_claimed, run_due
from tests.support.wake import WAIT_S, Heard, heard_on_redis
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.wake.announce import announcing


async def _more_than(heard: Heard, queue: str, seen: int) -> None:
    async def watch() -> None:
        while heard.count(queue) <= seen:
            await asyncio.sleep(0.01)

    await asyncio.wait_for(watch(), WAIT_S)


@pytest.mark.parametrize("child_fails", [False, True], ids=["child-completed", "child-failed"])
async def test_the_settle_of_a_last_child_publishes_its_parents_queue(
    pg_pool: asyncpg.Pool[Any], redis_url: str, redis_prefix: str, child_fails: bool
) -> None:
    async with heard_on_redis(redis_url, f"{redis_prefix}:wake") as (heard, announcer):
        plain = postgres_driver(pg_pool)
        driver = announcing(plain, announcer)
        try:
            request = {"key": "p", "org": "org-a", "count": 1, "fail": [0] if child_fails else []}
            parent_id = (await plain.enqueue(parent.request(request))).id
            [first] = await run_due(driver)
            assert first.outcome == "suspended"
            [child] = await due(driver)
            await announcer.flush()  # the child's own enqueue announce, if any, is heard first
            await asyncio.sleep(0.05)
            seen = heard.count(parent.definition.queue)
            done = await run_claimed(driver, child)
            assert done.outcome == ("dead-lettered" if child_fails else "completed")
            await _more_than(heard, parent.definition.queue, seen)
            [woken] = await due(driver)
            assert woken.id == parent_id
        finally:
            await plain.close()
