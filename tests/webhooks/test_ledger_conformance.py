"""One ledger contract, both ledgers: the memory ring and Postgres (batched or not) count
consecutive failures, reset on a success, never count a skip, and keep the disable verdict."""

from __future__ import annotations

import base64
import os
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import pytest

from ujobs.webhooks.ledger import (
    AttemptOutcome,
    DeliveryAttempt,
    MemoryWebhookLedger,
    WebhookLedger,
)
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.store_pg import PgWebhookStore

KEY = base64.b64encode(os.urandom(32)).decode()


@pytest.fixture(params=["memory", "postgres", "postgres-batched"])
async def ledger(
    request: pytest.FixtureRequest, pg_pool: asyncpg.Pool[Any]
) -> AsyncIterator[WebhookLedger]:
    if request.param == "memory":
        yield MemoryWebhookLedger()
        return
    pool = pg_pool
    batch = 60_000 if request.param == "postgres-batched" else None
    store = PgWebhookStore(pool, SecretBox.parse(KEY), batch_delivered_ms=batch)
    for endpoint in ("ep_a", "ep_b"):
        await store.add_endpoint("https://partner.example/hook", endpoint_id=endpoint)
    yield store.ledger
    await store.ledger.close()


def attempt(endpoint: str, job: str, outcome: AttemptOutcome) -> DeliveryAttempt:
    status = {"delivered": 200, "failed": 500, "skipped": None}[outcome]
    return DeliveryAttempt(endpoint, "evt_1", job, 1, outcome, status, None, 3, "", 1)


async def test_the_consecutive_count(ledger: WebhookLedger) -> None:
    assert await ledger.record(attempt("ep_a", "j1", "failed")) == 1
    assert await ledger.record(attempt("ep_a", "j2", "failed")) == 2
    assert await ledger.record(attempt("ep_b", "j3", "failed")) == 1  # per endpoint
    assert await ledger.record(attempt("ep_a", "j4", "skipped")) == 2
    assert await ledger.record(attempt("ep_a", "j5", "delivered")) == 0
    assert await ledger.record(attempt("ep_a", "j6", "failed")) == 1
    assert await ledger.record(attempt("ep_b", "j7", "failed")) == 2


async def test_the_verdict(ledger: WebhookLedger) -> None:
    assert not await ledger.is_disabled("ep_a")
    await ledger.disable("ep_a", "failures")
    await ledger.disable("ep_a", "gone")
    assert await ledger.is_disabled("ep_a")
    assert not await ledger.is_disabled("ep_b")
    # A success never re-enables: that is the operator's.
    await ledger.record(attempt("ep_a", "j1", "delivered"))
    assert await ledger.is_disabled("ep_a")
