"""Every Postgres enqueue statement writes the request's priority: the plain insert and the
full statement of a single enqueue, the controlled one (debounce / unique_for), the token-guarded
single and group inserts of the api, a batch's COPY and the deduping statement it falls back to,
and the all-new batch. The conformance suite covers the claim's order on every driver; this
reads each path's row."""

from __future__ import annotations

from typing import Any

import asyncpg

from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.services.api.tokens import TokenStore


def req(key: str, priority: int, **extra: Any) -> EnqueueRequest:
    return EnqueueRequest(
        name="send", input={"k": key}, idempotency_key=key, priority=priority, **extra
    )


async def priorities(pool: asyncpg.Pool[Any]) -> dict[str, int]:
    rows = await pool.fetch("select idempotency_key, priority from x_jobs")
    return {r["idempotency_key"]: r["priority"] for r in rows}


async def test_every_enqueue_statement_writes_the_priority(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    await pg.enqueue(req("announced", 1))  # enqueue.sql: the queue's first wake slot
    await pg.enqueue(req("plain", 2))  # enqueue_insert.sql: the slot is announced already
    await pg.enqueue(req("debounced", 3, debounce_ms=1_000))  # enqueue_controlled.sql
    token = (await TokenStore(pg_pool).create(tenant=None, scopes=("enqueue:*",))).record.id
    await pg.enqueue_while_live(req("guarded", 4), token)  # enqueue_insert_live.sql
    await pg.enqueue_many_while_live([req("group", 5)], [token])  # enqueue_many_live.sql
    await pg.enqueue_many([req("copied", 6), req("copied-too", 0)])  # the COPY
    # A batch meeting a live key: the COPY fails whole, enqueue_many.sql dedupes row by row.
    await pg.enqueue_many([req("plain", 9), req("after-dedupe", 7)])
    await pg.enqueue_many_new([req("all-new", 8)])  # enqueue_many_new.sql
    assert await priorities(pg_pool) == {
        "announced": 1,
        "plain": 2,
        "debounced": 3,
        "guarded": 4,
        "group": 5,
        "copied": 6,
        "copied-too": 0,
        "after-dedupe": 7,
        "all-new": 8,
    }
