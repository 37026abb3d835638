"""Every rule row of SEED § "Outbound webhooks are jobs too", against a real local receiver."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator, Callable
from email.utils import formatdate
from typing import Any

import pytest
from aiohttp import web

from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import T0, Kit, make_kit
from ujobs.errors import JobDrainedError, JobTenantMismatchError, LeaseLostError
from ujobs.jobs.retry import Retry
from ujobs.signal import Signal
from ujobs.webhooks.signature import verify_standard, verify_ultimate

KitFactory = Callable[..., Kit]


@pytest.fixture
async def kits() -> AsyncIterator[KitFactory]:
    made: list[Kit] = []

    def factory(**kwargs: Any) -> Kit:
        kit = make_kit(**kwargs)
        made.append(kit)
        return kit

    yield factory
    for kit in made:
        await kit.client.close()


def status(code: int, **headers: str) -> Any:
    async def answer(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.Response(status=code, headers=headers, text=f"answered {code}")

    return answer


async def test_a_delivery_is_signed_over_the_exact_bytes_sent(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    endpoint = kit.add_endpoint(receiver.url())
    kit.add_event(body='{"order": 7, "total": "9.90"}')
    await kit.enqueue()
    execution = await kit.attempt()
    assert execution.outcome == "completed"
    got = receiver.requests[0]
    assert got.body == b'{"order": 7, "total": "9.90"}'
    headers = receiver.lowered()
    assert headers["content-type"] == "application/json"
    assert headers["webhook-id"] == "evt_1"
    assert headers["webhook-timestamp"] == str(T0 // 1000)
    verify_standard(endpoint.secrets, got.headers, got.body, now_s=T0 // 1000)
    assert kit.ledger.attempts[0].outcome == "delivered"
    assert kit.ledger.attempts[0].status == 204


async def test_the_spec_scheme_sends_its_three_headers(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url(), scheme="ultimate", secrets=("plain-secret",))
    kit.add_event(id="evt_01HZ", topic="orders.paid")
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_01HZ"})
    assert (await kit.attempt()).outcome == "completed"
    headers = receiver.lowered()
    assert headers["x-ultimate-webhook-id"] == "evt_01HZ"
    assert headers["x-ultimate-webhook-topic"] == "orders.paid"
    assert headers["x-ultimate-webhook-signature"].startswith(f"t={T0 // 1000},v1=")
    verify_ultimate("plain-secret", headers, receiver.requests[0].body, now_s=T0 // 1000)


async def test_the_timestamp_is_send_time_so_a_retry_signs_again_now(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    endpoint = kit.add_endpoint(receiver.url())
    kit.add_event()
    receiver.answer = status(500)
    await kit.enqueue()
    first = await kit.attempt()
    assert first.outcome == "retried"
    kit.clock.advance(3 * 86_400_000)  # three days later
    await kit.due(first)
    receiver.answer = status(200)
    assert (await kit.attempt()).outcome == "completed"
    stamps = [int(r.headers["webhook-timestamp"]) for r in receiver.requests]
    assert stamps == [T0 // 1000, kit.clock.now_ms() // 1000]
    last = receiver.requests[-1]
    verify_standard(endpoint.secrets, last.headers, last.body, now_s=kit.clock.now_ms() // 1000)


async def test_a_colon_in_an_id_or_topic_dead_letters_before_any_socket(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url(), scheme="ultimate", secrets=("s",))
    kit.add_event(id="evt_1", topic="01HZ:orders.paid")
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_EVENT_INVALID")
    assert execution.attempt == 1
    assert receiver.requests == []


async def test_the_endpoints_own_headers_merge_under_the_frameworks(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    endpoint = kit.add_endpoint(
        receiver.url(),
        headers={
            "Webhook-Signature": "v1,forged",
            "X-Ultimate-Webhook-Signature": "t=1,v1=forged",
            "Content-Type": "text/plain",
            "Content-Length": "1",
            "Host": "evil.example",
            "Authorization": "Bearer partner-token",
        },
    )
    kit.add_event()
    await kit.enqueue()
    assert (await kit.attempt()).outcome == "completed"
    headers = receiver.lowered()
    assert headers["authorization"] == "Bearer partner-token"
    assert headers["content-type"] == "application/json"
    assert headers["host"] == f"127.0.0.1:{receiver.port}"
    assert "forged" not in headers["webhook-signature"]
    assert "x-ultimate-webhook-signature" not in headers
    verify_standard(endpoint.secrets, headers, receiver.requests[0].body, now_s=T0 // 1000)


async def test_a_redirect_is_never_followed(receiver: Receiver, kits: KitFactory) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url("/hook"))
    kit.add_event()

    async def redirect(request: web.Request, body: bytes) -> web.StreamResponse:
        if request.path == "/hook":
            return web.Response(status=307, headers={"location": receiver.url("/elsewhere")})
        return web.Response(status=200)

    receiver.answer = redirect
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("retried", "X_WEBHOOK_DELIVERY_FAILED")
    assert [r.path for r in receiver.requests] == ["/hook"]
    assert execution.error is not None
    assert getattr(execution.error, "meta", {})["location"] == receiver.url("/elsewhere")
    assert kit.ledger.attempts[0].status == 307


async def test_the_endpoint_is_never_checkpointed(receiver: Receiver, kits: KitFactory) -> None:
    kit = kits()
    endpoint = kit.add_endpoint(receiver.url())
    kit.add_event()
    job_id = await kit.enqueue()
    execution = await kit.attempt()
    assert execution.outcome == "completed"
    row = await kit.driver.introspect.get(job_id)  # type: ignore[union-attr]
    assert row is not None
    assert row.run_id == execution.run_id
    assert await kit.driver.load_steps(row.run_id, tenant_id=row.tenant_id) == []
    assert endpoint.secrets[0] not in repr(endpoint)
    introspect = kit.driver.introspect
    assert introspect is not None
    row = await introspect.get(job_id)
    assert row is not None
    assert endpoint.secrets[0] not in repr(row)
    assert endpoint.secrets[0] not in repr(execution)


async def test_every_attempt_is_recorded_before_the_throw(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    receiver.answer = status(500)
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("retried", "X_WEBHOOK_DELIVERY_FAILED")
    [row] = kit.ledger.attempts
    assert (row.outcome, row.status, row.attempt, row.code) == (
        "failed",
        500,
        1,
        "X_WEBHOOK_DELIVERY_FAILED",
    )
    assert row.response_excerpt == "answered 500"
    assert row.job_id == execution.job_id
    assert kit.ledger.consecutive["ep_1"] == 1


async def test_disable_after_consecutive_failures_then_no_more_sockets(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits(disable_after=2)
    kit.add_endpoint(receiver.url())
    kit.add_event()
    receiver.answer = status(502)
    await kit.enqueue()
    first = await kit.attempt()
    await kit.due(first)
    second = await kit.attempt()
    assert second.outcome == "retried"
    assert kit.ledger.disabled == {"ep_1": "failures"}
    await kit.due(second)
    third = await kit.attempt()
    assert (third.outcome, third.code) == ("dead-lettered", "X_WEBHOOK_ENDPOINT_DISABLED")
    assert len(receiver.requests) == 2
    assert [a.outcome for a in kit.ledger.attempts] == ["failed", "failed", "skipped"]
    # Re-enabling is the operator's: nothing the family does clears the verdict.
    assert kit.ledger.disabled == {"ep_1": "failures"}


async def test_a_success_resets_the_consecutive_count(receiver: Receiver, kits: KitFactory) -> None:
    kit = kits(disable_after=2)
    kit.add_endpoint(receiver.url())
    kit.add_event(id="evt_1")
    kit.add_event(id="evt_2")
    receiver.answer = status(500)
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_1"})
    first = await kit.attempt()
    receiver.answer = status(200)
    await kit.due(first)
    assert (await kit.attempt()).outcome == "completed"
    receiver.answer = status(500)
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_2"})
    assert (await kit.attempt()).outcome == "retried"
    assert kit.ledger.disabled == {}
    assert kit.ledger.consecutive["ep_1"] == 1


async def test_the_ledger_and_the_row_flag_are_asked_before_every_socket(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.ledger.disable("ep_1", "operator")
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_ENDPOINT_DISABLED")
    kit.ledger.enable("ep_1")
    kit.add_endpoint(receiver.url(), disabled=True)
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_1"})
    again = await kit.attempt()
    assert again.code == "X_WEBHOOK_ENDPOINT_DISABLED"
    assert receiver.requests == []


async def test_retry_after_seconds_is_honoured_and_clamped(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits(retry=Retry(attempts=5, delay="1s", max_delay="60s", jitter=False))
    kit.add_endpoint(receiver.url())
    kit.add_event()
    receiver.answer = status(429, **{"Retry-After": "30"})
    await kit.enqueue()
    first = await kit.attempt()
    assert (first.outcome, first.code) == ("retried", "X_WEBHOOK_DELIVERY_THROTTLED")
    assert first.resume_at_ms == kit.clock.now_ms() + 30_000
    await kit.due(first)
    receiver.answer = status(503, **{"Retry-After": "7200"})
    second = await kit.attempt()
    assert second.resume_at_ms == kit.clock.now_ms() + 60_000  # clamped by max_delay
    assert [a.status for a in kit.ledger.attempts] == [429, 503]


async def test_retry_after_as_an_http_date_reads_the_responses_own_date(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits(retry=Retry(attempts=5, delay="1s", max_delay="1h", jitter=False))
    kit.add_endpoint(receiver.url())
    kit.add_event()
    # The receiver's clock is a day off ours; only the difference of its two dates counts.
    their_now = T0 / 1000 + 86_400
    receiver.answer = status(
        429,
        **{
            "Date": formatdate(their_now, usegmt=True),
            "Retry-After": formatdate(their_now + 45, usegmt=True),
        },
    )
    await kit.enqueue()
    first = await kit.attempt()
    assert first.resume_at_ms == kit.clock.now_ms() + 45_000
    await kit.due(first)
    # A zero is unstated: the backoff schedule decides (attempt 2 of delay 1s: 2s).
    receiver.answer = status(429, **{"Retry-After": "0"})
    second = await kit.attempt()
    assert second.resume_at_ms == kit.clock.now_ms() + 2_000


async def test_410_is_terminal_and_disables_the_endpoint(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    receiver.answer = status(410)
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_DELIVERY_REJECTED")
    assert kit.ledger.disabled == {"ep_1": "gone"}


async def test_the_deadline_aborts_the_post_and_writes_no_ledger_row(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits(timeout="300ms")
    kit.add_endpoint(receiver.url())
    kit.add_event()
    release = asyncio.Event()

    async def hang(request: web.Request, body: bytes) -> web.StreamResponse:
        await release.wait()
        return web.Response(status=200)

    receiver.answer = hang
    await kit.enqueue()
    try:
        execution = await kit.attempt()
    finally:
        release.set()
    assert (execution.outcome, execution.code) == ("retried", "X_JOB_TIMEOUT")
    assert len(receiver.requests) == 1
    assert list(kit.ledger.attempts) == []
    assert kit.ledger.consecutive == {}


async def test_a_lost_lease_aborts_the_post_and_writes_no_ledger_row(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    release = asyncio.Event()
    signal = Signal()

    async def hang(request: web.Request, body: bytes) -> web.StreamResponse:
        signal.abort(LeaseLostError("the lease lapsed"))
        await release.wait()
        return web.Response(status=200)

    receiver.answer = hang
    await kit.enqueue()
    try:
        execution = await kit.attempt(signal=signal)
    finally:
        release.set()
    assert execution.code == "X_JOB_LEASE_LOST"
    assert list(kit.ledger.attempts) == []


async def test_the_drain_never_aborts_a_post_on_the_wire(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    signal = Signal()

    async def slow(request: web.Request, body: bytes) -> web.StreamResponse:
        signal.abort(JobDrainedError("draining"))
        await asyncio.sleep(0.2)
        return web.Response(status=200, text="ok")

    receiver.answer = slow
    await kit.enqueue()
    execution = await kit.attempt(signal=signal)
    assert execution.outcome == "completed"
    assert [a.outcome for a in kit.ledger.attempts] == ["delivered"]


async def test_a_failure_during_the_drain_is_recorded_like_any_other(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits()
    kit.add_endpoint(receiver.url())
    kit.add_event()
    signal = Signal()

    async def failing(request: web.Request, body: bytes) -> web.StreamResponse:
        signal.abort(JobDrainedError("draining"))
        return web.Response(status=500)

    receiver.answer = failing
    await kit.enqueue()
    await kit.attempt(signal=signal)
    assert [(a.outcome, a.status) for a in kit.ledger.attempts] == [("failed", 500)]


async def test_the_drain_stops_a_post_not_yet_sent(receiver: Receiver, kits: KitFactory) -> None:
    kit = kits()
    kit.add_event()
    signal = Signal()
    endpoint = kit.add_endpoint(receiver.url())
    real = kit.endpoints

    class DrainOnRead(dict[str, Any]):
        def get(self, key: str, default: Any = None) -> Any:
            signal.abort(JobDrainedError("draining"))  # SIGTERM lands while reading the row
            return real.get(key, default)

    kit.endpoints = DrainOnRead({"ep_1": endpoint})
    await kit.enqueue()
    execution = await kit.attempt(signal=signal)
    assert execution.outcome == "interrupted"
    assert receiver.requests == []
    assert list(kit.ledger.attempts) == []


async def test_an_org_owned_delivery_carries_org_id_to_both_seams(
    receiver: Receiver, kits: KitFactory
) -> None:
    kit = kits(tenant=lambda value: value.org_id)
    kit.add_endpoint(receiver.url())
    kit.add_event()
    with pytest.raises(JobTenantMismatchError):
        await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_1"})
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_1", "org_id": "org_a"})
    assert (await kit.attempt()).outcome == "completed"
    assert [(seam, v.org_id) for seam, v in kit.seen] == [("endpoint", "org_a"), ("event", "org_a")]


async def test_a_queued_delivery_without_its_org_dead_letters_before_either_seam(
    receiver: Receiver, kits: KitFactory
) -> None:
    # Queued by the declaration before the upgrade to tenant=org_id: no org_id on the row.
    before = kits(tenant="none", name="before.webhooks")
    request = before.handle.request({"endpoint_id": "ep_1", "event_id": "evt_1"})
    kit = kits(tenant=lambda value: value.org_id)
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.driver.enqueue(dataclasses.replace(request, name=kit.handle.name))
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_JOB_TENANT_MISMATCH")
    assert execution.attempt == 1
    assert kit.seen == []
    assert receiver.requests == []


async def test_a_tenantless_family_refuses_an_org_id(receiver: Receiver, kits: KitFactory) -> None:
    kit = kits(tenant="none")
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.enqueue({"endpoint_id": "ep_1", "event_id": "evt_1", "org_id": "org_a"})
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_JOB_TENANT_MISMATCH")
    assert kit.seen == []
    assert receiver.requests == []
