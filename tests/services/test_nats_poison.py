"""Poison messages against a real api and its NATS edge: every enqueue-stream message ends
(acked, or on ``<prefix>.rejected.<job>``) within ``UJOBS_NATS_MAX_DELIVERIES`` deliveries,
a flood of them does not strand another tenant's message behind them, and the api's lines
about them are rate-limited.

The poison is real: ``tests.services.poison_app``'s ``fragile`` job raises an error that is not
ours from its own idempotency key for the note ``poison`` (``X_INTERNAL`` on every delivery).
Deliveries are counted on the wire: the api pulls into an ``_INBOX.…`` subject, which a
second subscriber of the same NATS sees too."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import orjson
import pytest
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from tests.services.api_support import ORG_A, ORG_B, MakeClient
from tests.services.nats_support import NatsApi, start_nats_api
from tests.services.poison_app import POISON
from ujobs.clock import FrozenClock
from ujobs.services.nats.consumer import delivery_count
from ujobs.services.nats.edge import answer_bytes

POISON_APP = "tests.services.poison_app:api"
WAIT_S = 60.0


async def _until(check: Callable[[], Awaitable[bool]], what: str) -> None:
    deadline = time.monotonic() + WAIT_S
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"gave up waiting for {what}")
        await asyncio.sleep(0.05)


async def _listen(nc: Client, subject: str) -> asyncio.Queue[dict[str, Any]]:
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def cb(msg: Msg) -> None:
        await got.put(orjson.loads(msg.data))

    await nc.subscribe(subject, cb=cb)
    await nc.flush()
    return got


async def _take(queue: asyncio.Queue[dict[str, Any]], count: int) -> list[dict[str, Any]]:
    return [await asyncio.wait_for(queue.get(), WAIT_S) for _ in range(count)]


async def _deliveries(edge: NatsApi) -> dict[int, list[int]]:
    """Stream sequence -> the delivery counts seen, of every delivery to the api from here on."""
    seen: dict[int, list[int]] = defaultdict(list)
    ack_prefix = f"$JS.ACK.{edge.names.enqueue_stream}."

    async def cb(msg: Msg) -> None:
        if msg.reply and msg.reply.startswith(ack_prefix):
            md = msg.metadata
            seen[md.sequence.stream].append(md.num_delivered)

    await edge.nc.subscribe("_INBOX.>", cb=cb)
    await edge.nc.flush()
    return seen


async def _publish(edge: NatsApi, token: str, org: str, note: str, msg_id: str) -> int:
    ack = await edge.nc.jetstream().publish(
        edge.names.js_enqueue_subject("fragile"),
        orjson.dumps({"input": {"org_id": org, "note": note}}),
        headers={"Authorization": f"Bearer {token}", "Nats-Msg-Id": msg_id},
    )
    return ack.seq


async def _drained(edge: NatsApi) -> bool:
    js = edge.nc.jetstream()
    info = await js.consumer_info(edge.names.enqueue_stream, edge.names.durable)
    stream = await js.stream_info(edge.names.enqueue_stream)
    return info.num_pending == 0 and info.num_ack_pending == 0 and stream.state.messages == 0


async def _landed(edge: NatsApi) -> bool:
    return bool(await edge.jobs())


def _field(record: logging.LogRecord, name: str) -> Any:
    """A field the line carries (``extra``)."""
    return record.__dict__[name]


def _lines(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.getMessage() == event]


async def test_an_unexpected_error_is_delivered_at_most_n_times_then_rejected(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async for edge in start_nats_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        nats_url,
        UJOBS_APP=POISON_APP,
        UJOBS_NATS_MAX_DELIVERIES="3",
    ):
        token = await edge.token("enqueue:fragile", tenant=ORG_A)
        seen = await _deliveries(edge)
        rejected = await _listen(edge.nc, edge.names.rejected_subject("fragile"))
        seq = await _publish(edge, token, ORG_A, POISON, "poison-1")
        [got] = await _take(rejected, 1)
        assert got["error"]["code"] == "X_INTERNAL"
        # Redacted: what the job's code raised stays in the api's log.
        assert got["error"]["message"] == (
            "unexpected ZeroDivisionError; the api logged the detail"
        )
        assert (got["streamSeq"], got["msgId"], got["deliveries"]) == (seq, "poison-1", 3)
        assert got["subject"] == edge.names.js_enqueue_subject("fragile")
        # Terminated on its third delivery: gone from the work queue, never delivered again.
        await _until(functools.partial(_drained, edge), "the stream to be empty")
        assert seen[seq] == [1, 2, 3]
        assert await edge.jobs() == []


async def test_a_flood_of_poison_past_max_ack_pending_does_not_strand_another_tenant(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async for edge in start_nats_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        nats_url,
        UJOBS_APP=POISON_APP,
        UJOBS_NATS_MAX_ACK_PENDING="4",
        UJOBS_NATS_MAX_DELIVERIES="2",
    ):
        info = await edge.nc.jetstream().consumer_info(
            edge.names.enqueue_stream, edge.names.durable
        )
        assert info.config.max_ack_pending == 4
        hostile = await edge.token("enqueue:fragile", tenant=ORG_A)
        victim = await edge.token("enqueue:fragile", tenant=ORG_B)
        rejected = await _listen(edge.nc, edge.names.rejected_subject("fragile"))
        poison = 3 * 4  # three times what the consumer may hold unacked, all ahead of it
        for i in range(poison):
            await _publish(edge, hostile, ORG_A, POISON, f"poison-{i}")
        await _publish(edge, victim, ORG_B, "paid", "good-1")

        await _until(functools.partial(_landed, edge), "the other tenant's message to land")
        [row] = await edge.jobs()
        assert (row["tenant_id"], row["idempotency_key"]) == (ORG_B, f"fragile:{ORG_B}:paid")
        got = await _take(rejected, poison)
        assert {g["msgId"] for g in got} == {f"poison-{i}" for i in range(poison)}
        # Given up at the limit; one delivery more when the ack wait ran out on a message
        # still waiting in a busy api's pull window: bounded either way.
        assert {g["error"]["code"] for g in got} == {"X_INTERNAL"}
        assert all(2 <= g["deliveries"] <= 3 for g in got), got
        await _until(functools.partial(_drained, edge), "the stream to be empty")


async def test_lines_about_failing_messages_are_rate_limited(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    nats_url: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One line per reason per window of the api's clock (frozen here: the window only ends
    when the test moves it), the next line counting those left out; over request/reply, a
    poison request is answered with its error (not left to time out), its lines limited too."""
    caplog.set_level(logging.WARNING, logger="ujobs.nats")
    clock = FrozenClock()
    async for edge in start_nats_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        nats_url,
        clock=clock,
        UJOBS_APP=POISON_APP,
        UJOBS_NATS_MAX_DELIVERIES="3",
    ):
        token = await edge.token("enqueue:fragile", tenant=ORG_A)
        for _ in range(5):
            answer = await edge.request(
                edge.names.enqueue_subject("fragile"),
                {"input": {"org_id": ORG_A, "note": POISON}},
                token,
            )
            assert answer["error"]["code"] == "X_INTERNAL"
            assert "secret.py" not in answer["error"]["message"]
        [unhandled] = _lines(caplog, "ujobs.nats.unhandled")
        assert unhandled.exc_info is not None  # the traceback the answer says was logged

        rejected = await _listen(edge.nc, edge.names.rejected_subject("fragile"))
        for i in range(10):
            await _publish(edge, token, ORG_A, POISON, f"poison-{i}")
        await _take(rejected, 10)
        # 10 messages x 3 failing deliveries: 20 retries and 10 give-ups, one line each kind.
        retried = _lines(caplog, "ujobs.nats.enqueue-retried")
        gave_up = _lines(caplog, "ujobs.nats.enqueue-gave-up")
        assert [(_field(r, "code"), _field(r, "suppressed")) for r in retried] == [
            ("X_INTERNAL", 0)
        ]
        assert [_field(r, "suppressed") for r in gave_up] == [0]
        assert retried[0].exc_info is not None  # the one line written says what raised

        clock.advance(10_000)  # the next window: the next line counts the ones left out
        await _publish(edge, token, ORG_A, POISON, "poison-late")
        await _take(rejected, 1)
        retried = _lines(caplog, "ujobs.nats.enqueue-retried")
        gave_up = _lines(caplog, "ujobs.nats.enqueue-gave-up")
        assert [_field(r, "suppressed") for r in retried] == [0, 19]
        assert [_field(r, "suppressed") for r in gave_up] == [0, 9]


@pytest.mark.parametrize(
    ("reply", "count"),
    [
        ("$JS.ACK.T1_ENQUEUE.t1-api.1.42.40.1733370000123456789.7", 1),
        ("$JS.ACK.T1_ENQUEUE.t1-api.12.42.90.1733370000999999999.0", 12),
        ("$JS.ACK.hub.ACCHASH.T1_ENQUEUE.t1-api.3.42.40.1733370000000499999.7.r4nd", 3),
        ("$JS.ACK.hub.ACCHASH.T1_ENQUEUE.t1-api.5.42.40.1733370000000500000.7", 5),
    ],
)
def test_the_delivery_count_is_the_one_metadata_gives(reply: str, count: int) -> None:
    msg = Msg(_client=None, subject="t1.js.enqueue.notify", reply=reply)  # type: ignore[arg-type]
    assert delivery_count(reply) == msg.metadata.num_delivered == count
    with pytest.raises(NotJSMessageError):
        delivery_count("_INBOX.abc.def")


def test_an_error_whose_meta_is_not_json_still_goes_out_with_its_code() -> None:
    # Unanswered (request/reply) or unpublished (rejected), the message would never end.
    body = {"error": {"code": "X_INTERNAL", "message": "m", "meta": {"x": object()}}, "seq": 1}
    assert orjson.loads(answer_bytes(body)) == {
        "error": {"code": "X_INTERNAL", "message": "m", "meta": {}},
        "seq": 1,
    }
