"""Endpoints, subscriptions, events and the ledger in Postgres, and the built-in families that
deliver from them: publish fans out per subscribed endpoint, secrets are sealed at rest."""

from __future__ import annotations

import asyncio
import base64
import os
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg
import pytest

from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import LOCAL
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.execution.attempt import execute_job
from ujobs.execution.outcome import JobExecution
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.webhooks import builtin
from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.errors import (
    WebhookEndpointInvalidError,
    WebhookEndpointUnknownError,
    WebhookEventInvalidError,
    WebhookEventUnknownError,
)
from ujobs.webhooks.family import install_client
from ujobs.webhooks.ledger import DeliveryAttempt
from ujobs.webhooks.pace_pg import PgPace
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.signature import verify_standard
from ujobs.webhooks.store_pg import PgWebhookStore

T0 = 1_700_000_000_000


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


@dataclass
class Env:
    pool: asyncpg.Pool[Any]
    store: PgWebhookStore
    driver: PostgresDriver
    clock: FrozenClock
    client: WebhookClient

    async def attempt(self) -> JobExecution:
        claimed = await self.driver.claim(
            ClaimOptions(queues=["webhooks"], limit=1, worker_id="w1", visibility_ms=30_000)
        )
        assert len(claimed) == 1, "expected one due delivery"
        handle = builtin.families().job(claimed[0].name)
        assert handle is not None
        return await execute_job(claimed[0], driver=self.driver, handle=handle, context=None)


@pytest.fixture
async def env(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[Env]:
    clock = FrozenClock(T0)
    store = PgWebhookStore(pg_pool, SecretBox.parse(new_key()), clock=clock, policy=LOCAL)
    driver = postgres_driver(pg_pool, clock=clock)
    client = WebhookClient(LOCAL)
    set_job_driver(driver)
    builtin.install_store(store)
    install_client(client)
    try:
        yield Env(pg_pool, store, driver, clock, client)
    finally:
        install_client(None)
        builtin.install_store(None)
        reset_job_driver()
        await client.close()
        await driver.close()


def attempt_row(**overrides: Any) -> DeliveryAttempt:
    fields: dict[str, Any] = {
        "endpoint_id": "ep_1",
        "event_id": "evt_1",
        "job_id": "job_1",
        "attempt": 1,
        "outcome": "failed",
        "status": 500,
        "code": "X_WEBHOOK_DELIVERY_FAILED",
        "latency_ms": 12,
        "response_excerpt": "oops",
        "at_ms": T0,
    }
    fields.update(overrides)
    return DeliveryAttempt(**fields)


async def test_an_endpoint_is_stored_with_its_secret_sealed(env: Env) -> None:
    created = await env.store.add_endpoint(
        "https://partner.example/hook",
        tenant="org_a",
        topics=["orders.paid", "orders.refunded"],
        headers={"Authorization": "Bearer t"},
        endpoint_id="ep_1",
        rate_per_s=5,
    )
    assert created.secret.startswith("whsec_")
    stored = await env.pool.fetchval("select secret_sealed from x_webhook_endpoints")
    assert created.secret not in stored
    found = await env.store.endpoint("ep_1")
    assert found is not None
    endpoint, tenant = found
    assert (endpoint.secrets, tenant, endpoint.scheme) == ((created.secret,), "org_a", "standard")
    assert endpoint.rate_per_s == 5
    [info] = await env.store.endpoints("org_a")
    assert (info.topics, info.rate_per_s) == (["orders.paid", "orders.refunded"], 5)
    assert created.secret not in repr(info.to_dict())
    assert info.to_dict()["headers"] == ["Authorization"]
    assert await env.store.endpoints("org_b") == []


async def test_bad_endpoints_are_refused_with_their_codes(env: Env) -> None:
    await env.store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    with pytest.raises(WebhookEndpointInvalidError):
        await env.store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    with pytest.raises(WebhookEndpointInvalidError):
        await env.store.add_endpoint("https://10.0.0.1/hook")
    with pytest.raises(WebhookEndpointInvalidError):
        await env.store.add_endpoint("https://partner.example/hook", scheme="hmac")
    with pytest.raises(WebhookEventInvalidError):
        await env.store.add_endpoint("https://partner.example/hook", topics=["a:b"])
    with pytest.raises(WebhookEndpointInvalidError):
        await env.store.add_endpoint("https://partner.example/hook", rate_per_s=-1)
    with pytest.raises(WebhookEndpointUnknownError):
        await env.store.disable("ep_missing")


async def test_disable_and_enable_and_the_consecutive_count(env: Env) -> None:
    await env.store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    ledger = env.store.ledger
    assert await ledger.record(attempt_row(job_id="j1")) == 1
    assert await ledger.record(attempt_row(job_id="j2")) == 2
    # The same attempt recorded twice (a retried write, a redelivery) counts once.
    assert await ledger.record(attempt_row(job_id="j2")) == 2
    assert await ledger.record(attempt_row(job_id="j3", outcome="skipped", status=None)) == 2
    assert await ledger.record(attempt_row(job_id="j4", outcome="delivered", status=200)) == 0
    assert await env.pool.fetchval("select count(*) from x_webhook_deliveries") == 4
    await ledger.disable("ep_1", "failures")
    assert await ledger.is_disabled("ep_1")
    await env.store.disable("ep_1")  # the first verdict's reason stays
    [info] = await env.store.endpoints()
    assert (info.disabled_reason, info.disabled_at_ms) == ("failures", T0)
    await env.store.enable("ep_1")
    assert not await ledger.is_disabled("ep_1")


async def test_newest_deliveries_answers_each_endpoints_latest_attempt_in_one_read(
    env: Env,
) -> None:
    for endpoint_id in ("ep_1", "ep_2", "ep_3"):
        await env.store.add_endpoint("https://partner.example/hook", endpoint_id=endpoint_id)
    ledger = env.store.ledger
    await ledger.record(attempt_row(endpoint_id="ep_1", job_id="j1", at_ms=T0))
    await ledger.record(
        attempt_row(endpoint_id="ep_1", job_id="j2", outcome="delivered", status=200, at_ms=T0 + 5)
    )
    await ledger.record(attempt_row(endpoint_id="ep_2", job_id="j3", at_ms=T0 + 9))
    newest = await env.store.newest_deliveries(["ep_1", "ep_2", "ep_3"])
    assert {k: (a.job_id, a.outcome) for k, a in newest.items()} == {
        "ep_1": ("j2", "delivered"),
        "ep_2": ("j3", "failed"),
    }  # ep_3 was never attempted
    assert newest["ep_1"] == (await env.store.deliveries("ep_1", limit=1))[0]
    assert await env.store.newest_deliveries([]) == {}


async def test_a_rotated_secret_signs_beside_the_old_one_until_the_grace_ends(env: Env) -> None:
    created = await env.store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    new = await env.store.rotate_secret("ep_1", grace_ms=60_000)
    found = await env.store.endpoint("ep_1")
    assert found is not None
    assert found[0].secrets == (new, created.secret)
    env.clock.advance(60_001)
    later = await env.store.endpoint("ep_1")
    assert later is not None
    assert later[0].secrets == (new,)


async def test_concurrent_loads_share_a_statement_and_each_reads_the_row_as_it_is_now(
    env: Env,
) -> None:
    first = await env.store.add_endpoint("https://partner.example/a", endpoint_id="ep_1")
    await env.store.add_endpoint("https://partner.example/b", tenant="org_b", endpoint_id="ep_2")
    ident, _ = await env.store.store_event("orders.paid", b"{}", tenant=None, event_id="evt_1")
    a, b, unknown_event, unknown_endpoint = await asyncio.gather(
        env.store.load("ep_1", ident),
        env.store.load("ep_2", ident),
        env.store.load("ep_1", "evt_missing"),
        env.store.load("ep_missing", ident),
    )
    assert a is not None
    assert a.event is not None
    assert (a.endpoint.url, a.endpoint.secrets, a.event.body) == (
        "https://partner.example/a",
        (first.secret,),
        b"{}",
    )
    assert b is not None
    assert (b.endpoint.url, b.tenant_id) == ("https://partner.example/b", "org_b")
    assert unknown_event is not None
    assert unknown_event.event is None
    assert unknown_endpoint is None
    # The opened endpoint is remembered by the row's values, never past a change to the row.
    new = await env.store.rotate_secret("ep_1", grace_ms=0)
    await env.store.disable("ep_1")
    again = await env.store.load("ep_1", ident)
    assert again is not None
    assert (again.endpoint.secrets, again.endpoint.disabled) == ((new,), True)


async def test_reseal_moves_every_secret_under_the_new_key(pg_pool: asyncpg.Pool[Any]) -> None:
    old, new = new_key(), new_key()
    before = PgWebhookStore(pg_pool, SecretBox.parse(f"old:{old}"), policy=LOCAL)
    created = await before.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    await before.rotate_secret("ep_1")
    during = PgWebhookStore(pg_pool, SecretBox.parse(f"new:{new},old:{old}"), policy=LOCAL)
    assert await during.reseal() == 1
    assert await during.reseal() == 0
    after = PgWebhookStore(pg_pool, SecretBox.parse(f"new:{new}"), policy=LOCAL)
    found = await after.endpoint("ep_1")
    assert found is not None
    assert found[0].secrets[1] == created.secret


async def test_publish_fans_out_to_each_subscribed_endpoint_of_the_tenant(env: Env) -> None:
    url = "https://partner.example/hook"
    await env.store.add_endpoint(url, tenant="org_a", topics=["orders.paid"], endpoint_id="a1")
    await env.store.add_endpoint(url, tenant="org_a", topics=["*"], endpoint_id="a2")
    await env.store.add_endpoint(url, tenant="org_a", topics=["users.new"], endpoint_id="a3")
    await env.store.add_endpoint(url, tenant="org_b", topics=["*"], endpoint_id="b1")
    await env.store.add_endpoint(url, topics=["*"], endpoint_id="g1")
    published = await builtin.publish("orders.paid", b'{"id":1}', tenant="org_a", event_id="e1")
    assert len(published.deliveries) == 2
    rows = await env.pool.fetch("select name, input::text as input from x_jobs order by input")
    assert [r["name"] for r in rows] == ["ujobs.webhooks", "ujobs.webhooks"]
    assert [r["input"] for r in rows] == [
        '{"org_id": "org_a", "event_id": "e1", "endpoint_id": "a1"}',
        '{"org_id": "org_a", "event_id": "e1", "endpoint_id": "a2"}',
    ]
    again = await builtin.publish("orders.paid", b'{"id":1}', tenant="org_a", event_id="e1")
    assert [d.deduped for d in again.deliveries] == [True, True]
    untenanted = await builtin.publish("orders.paid", b"{}", event_id="e2")
    assert len(untenanted.deliveries) == 1
    assert await env.pool.fetchval(
        "select name from x_jobs where input->>'endpoint_id' = 'g1'"
    ) == ("ujobs.webhooks.global")


async def test_the_built_in_family_delivers_and_ledgers_in_postgres(
    env: Env, receiver: Receiver
) -> None:
    created = await env.store.add_endpoint(
        receiver.url(), tenant="org_a", topics=["orders.paid"], endpoint_id="ep_1"
    )
    await builtin.publish("orders.paid", b'{"id": 7}', tenant="org_a", event_id="evt_7")
    execution = await env.attempt()
    assert execution.outcome == "completed"
    got = receiver.requests[0]
    # A new endpoint's body is the Standard Webhooks envelope around the published bytes.
    assert (
        got.body
        == b'{"type":"orders.paid","timestamp":"2023-11-14T22:13:20.000Z","data":{"id": 7}}'
    )
    verify_standard(created.secret, got.headers, got.body)
    [row] = await env.store.deliveries("ep_1")
    assert (row.outcome, row.status, row.event_id, row.attempt) == ("delivered", 204, "evt_7", 1)


async def test_the_built_in_family_paces_by_the_fleet_wide_row(
    env: Env, receiver: Receiver
) -> None:
    """Another deliverer took the endpoint's next two slots: this one's POST waits for the
    third (0.4 s at 5 a second) instead of sending at once as a per-process pace would."""
    await env.store.add_endpoint(receiver.url(), tenant="org_a", endpoint_id="ep_1", rate_per_s=5)
    other = PgPace(env.pool, env.clock)
    assert [await other.reserve("ep_1", 5) for _ in range(2)] == pytest.approx([0, 0.2])
    await builtin.publish("orders.paid", b"{}", tenant="org_a", event_id="evt_1")
    started = time.monotonic()
    execution = await env.attempt()
    assert execution.outcome == "completed"
    assert len(receiver.requests) == 1
    assert time.monotonic() - started >= 0.35


async def test_an_endpoint_of_another_tenant_is_unknown_to_the_delivery(
    env: Env, receiver: Receiver
) -> None:
    await env.store.add_endpoint(receiver.url(), tenant="org_b", endpoint_id="ep_b")
    await env.store.store_event("orders.paid", b"{}", tenant="org_a", event_id="evt_1")
    await builtin.deliver.enqueue({"endpoint_id": "ep_b", "event_id": "evt_1", "org_id": "org_a"})
    execution = await env.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_ENDPOINT_UNKNOWN")
    assert receiver.requests == []


async def test_redeliver_after_a_re_enable_queues_what_the_endpoint_missed(
    env: Env, receiver: Receiver
) -> None:
    await env.store.add_endpoint(receiver.url(), tenant="org_a", endpoint_id="ep_1")
    await env.store.disable("ep_1")
    for n in (1, 2):
        await builtin.publish("orders.paid", b"{}", tenant="org_a", event_id=f"evt_{n}")
        execution = await env.attempt()
        assert execution.code == "X_WEBHOOK_ENDPOINT_DISABLED"
    failed = await env.store.deliveries("ep_1", failed_only=True)
    assert [d.outcome for d in failed] == ["skipped", "skipped"]
    assert receiver.requests == []
    await env.store.enable("ep_1")
    queued = await builtin.redeliver("ep_1", since_ms=T0)
    assert len(queued) == 2
    assert [(await env.attempt()).outcome for _ in queued] == ["completed", "completed"]
    assert sorted(r.headers["webhook-id"] for r in receiver.requests) == ["evt_1", "evt_2"]
    assert await env.store.failed_events("ep_1", T0) == []
    one = await builtin.redeliver("ep_1", event_id="evt_1")
    assert len(one) == 1
    with pytest.raises(WebhookEventUnknownError):
        await builtin.redeliver("ep_1", event_id="evt_missing")


async def test_a_success_at_zero_failures_leaves_the_endpoint_row_alone(env: Env) -> None:
    await env.store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    xmin = "select xmin::text from x_webhook_endpoints where id = 'ep_1'"
    before = await env.pool.fetchval(xmin)
    delivered = {"outcome": "delivered", "status": 200, "code": None}
    for n in range(3):
        assert await env.store.ledger.record(attempt_row(job_id=f"j{n}", **delivered)) == 0
    assert await env.pool.fetchval(xmin) == before
    assert await env.store.ledger.record(attempt_row(job_id="j9")) == 1
    assert await env.pool.fetchval(xmin) != before


async def test_batched_successes_are_written_together_and_before_a_failure(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    store = PgWebhookStore(
        pg_pool, SecretBox.parse(new_key()), policy=LOCAL, batch_delivered_ms=60_000
    )
    await store.add_endpoint("https://partner.example/hook", endpoint_id="ep_1")
    ledger = store.ledger
    count = "select count(*) from x_webhook_deliveries"
    assert await ledger.record(attempt_row(job_id="f1")) == 1
    delivered = {"outcome": "delivered", "status": 200, "code": None}
    for n in range(3):
        assert await ledger.record(attempt_row(job_id=f"ok{n}", **delivered)) == 0
    assert await pg_pool.fetchval(count) == 1  # buffered: a success throws nothing
    # A failure writes the buffer first, so the successes reset the count before it moves.
    assert await ledger.record(attempt_row(job_id="f2")) == 1
    outcomes = await pg_pool.fetch("select job_id, outcome from x_webhook_deliveries order by seq")
    assert [tuple(r) for r in outcomes] == [
        ("f1", "failed"),
        ("ok0", "delivered"),
        ("ok1", "delivered"),
        ("ok2", "delivered"),
        ("f2", "failed"),
    ]
    await ledger.record(attempt_row(job_id="ok9", **delivered))
    await ledger.close()
    assert await pg_pool.fetchval(count) == 6
    assert await pg_pool.fetchval("select consecutive_failures from x_webhook_endpoints") == 0
