"""What a receiver can do to a delivery beyond the rule rows: answer too slowly, stream an
endless body, refuse the connection, answer a large body (stored truncated)."""

from __future__ import annotations

import asyncio
import itertools
import logging
import socket
import time
from collections.abc import AsyncIterator

import pytest
from aiohttp import web

from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import Kit, make_kit
from ujobs.webhooks.errors import WebhookEndpointInvalidError
from ujobs.webhooks.family import Endpoint
from ujobs.webhooks.ledger import EXCERPT_CHARS, DeliveryAttempt, MemoryWebhookLedger


@pytest.fixture
async def kit() -> AsyncIterator[Kit]:
    made = make_kit(request_timeout="300ms")
    yield made
    await made.client.close()


async def test_a_receiver_slower_than_the_request_timeout_is_a_counted_failure(
    receiver: Receiver, kit: Kit
) -> None:
    async def slow(request: web.Request, body: bytes) -> web.StreamResponse:
        await asyncio.sleep(2)
        return web.Response(status=200)

    receiver.answer = slow
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("retried", "X_WEBHOOK_DELIVERY_FAILED")
    assert getattr(execution.error, "meta", {})["kind"] == "timeout"
    [row] = kit.ledger.attempts
    assert (row.outcome, row.status, row.code) == ("failed", None, "X_WEBHOOK_DELIVERY_FAILED")
    assert row.latency_ms >= 250


async def test_an_endless_body_is_read_only_up_to_the_limit(receiver: Receiver, kit: Kit) -> None:
    async def endless(request: web.Request, body: bytes) -> web.StreamResponse:
        response = web.StreamResponse(status=200)
        await response.prepare(request)
        for _ in range(10_000):
            await response.write(b"x" * 1024)
        return response

    receiver.answer = endless
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.enqueue()
    execution = await kit.attempt()
    assert execution.outcome == "completed"
    [row] = kit.ledger.attempts
    assert row.response_excerpt == "x" * EXCERPT_CHARS


async def test_a_large_error_body_is_stored_truncated(receiver: Receiver, kit: Kit) -> None:
    async def big(request: web.Request, body: bytes) -> web.StreamResponse:
        return web.Response(status=500, text="e" * 50_000)

    receiver.answer = big
    kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.enqueue()
    await kit.attempt()
    [row] = kit.ledger.attempts
    assert len(row.response_excerpt) == EXCERPT_CHARS


async def test_a_refused_connection_is_a_counted_failure(kit: Kit) -> None:
    with socket.socket() as probe:  # a port that was free a moment ago: nothing listens
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    kit.add_endpoint(f"http://127.0.0.1:{port}/hook")
    kit.add_event()
    await kit.enqueue()
    execution = await kit.attempt()
    assert (execution.outcome, execution.code) == ("retried", "X_WEBHOOK_DELIVERY_FAILED")
    assert getattr(execution.error, "meta", {})["kind"] == "connect"
    assert [a.outcome for a in kit.ledger.attempts] == ["failed"]


async def test_the_secret_is_in_no_error_log_or_ledger_row(
    receiver: Receiver, kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    receiver.answer = lambda request, body: _status(401)
    endpoint = kit.add_endpoint(receiver.url())
    kit.add_event()
    await kit.enqueue()
    with caplog.at_level(logging.DEBUG):
        execution = await kit.attempt()
    assert "jobs.attempt.failed" in caplog.text
    assert endpoint.secrets[0] not in caplog.text
    assert endpoint.secrets[0][6:] not in caplog.text
    assert endpoint.secrets[0] not in str(execution.error)
    assert endpoint.secrets[0] not in repr(getattr(execution.error, "meta", {}))
    assert endpoint.secrets[0] not in repr(list(kit.ledger.attempts))


async def _status(code: int) -> web.StreamResponse:
    return web.Response(status=code, text="unauthorized")


async def test_an_endpoints_rate_spaces_its_posts(receiver: Receiver) -> None:
    kit = make_kit()
    arrivals: list[float] = []

    async def stamp(request: web.Request, body: bytes) -> web.StreamResponse:
        arrivals.append(time.monotonic())
        return web.Response(status=204)

    receiver.answer = stamp
    try:
        kit.add_endpoint(receiver.url(), rate_per_s=10)
        for n in range(3):
            kit.add_event(id=f"evt_{n}")
            await kit.enqueue({"endpoint_id": "ep_1", "event_id": f"evt_{n}"})
        results = await asyncio.gather(*(kit.attempt() for _ in range(3)))
    finally:
        await kit.client.close()
    assert [r.outcome for r in results] == ["completed"] * 3
    gaps = [b - a for a, b in itertools.pairwise(arrivals)]
    assert len(gaps) == 2
    assert all(gap >= 0.09 for gap in gaps), gaps  # 100 ms apart at 10 a second


def test_a_rate_must_be_positive() -> None:
    with pytest.raises(WebhookEndpointInvalidError):
        Endpoint(id="ep", url="https://partner.example", secrets=("s",), rate_per_s=0)


async def test_the_memory_ledger_is_a_bounded_ring() -> None:
    ledger = MemoryWebhookLedger(capacity=3)
    for n in range(5):
        await ledger.record(
            DeliveryAttempt("ep", f"evt_{n}", f"j{n}", 1, "failed", 500, None, 1, "", n)
        )
    assert [a.event_id for a in ledger.attempts] == ["evt_2", "evt_3", "evt_4"]
    assert ledger.consecutive["ep"] == 5
