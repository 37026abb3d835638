"""``ujobs.limits`` at every edge of a live api, black-box: HTTP single and batch, NATS
request/reply, the NATS enqueue stream, and events. An input nested past ``MAX_JSON_DEPTH`` or
a text field past its bytes is 400 ``X_INPUT_INVALID`` (on the stream: published to
``rejected`` and terminated) whatever the depth or the length, and nothing is queued."""

from __future__ import annotations

import asyncio
import base64
import os
import random
import string
from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
import pytest
from nats.aio.msg import Msg

from tests.services.api_support import ORG_A, MakeClient, make_api
from tests.services.nats_support import NatsApi, start_nats_api
from ujobs.limits import MAX_JSON_DEPTH

APP = "tests.services.hostile_app:api"
JOB = "open.input"
DEPTHS = [300, 1000, 5000]
"""Past pydantic's serializer (255), near orjson's parser (1,024), and past it."""


@pytest.fixture
async def edge(
    aiohttp_client: Any, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> AsyncIterator[NatsApi]:
    async for started in start_nats_api(aiohttp_client, pg_dsn, pg_pool, nats_url, UJOBS_APP=APP):
        yield started


def nested(depth: int) -> bytes:
    """``depth`` levels of arrays around a 1, written by hand: orjson cannot write it."""
    return b"[" * depth + b"1" + b"]" * depth


def an_input(data: bytes = b"null", *, tenant: str = ORG_A, key: str = "k") -> bytes:
    head = orjson.dumps({"tenant": tenant, "key": key})[:-1]
    return head + b',"data":' + data + b"}"


def incompressible(length: int) -> str:
    """Text Postgres cannot shrink into an index row (repeated letters it would compress)."""
    return "".join(random.Random(34).choices(string.ascii_letters + string.digits, k=length))


def max_depth_named(error: dict[str, Any]) -> bool:
    """Whether a refusal (or one of a batch's failures) names the depth limit."""
    metas = [error["meta"], *(f["meta"] for f in error["meta"].get("failures", []))]
    return any(meta.get("maxDepth") == MAX_JSON_DEPTH for meta in metas)


async def post(edge: NatsApi, path: str, data: bytes, token: str) -> tuple[int, Any]:
    response = await edge.api.client.post(
        path, data=data, headers={"Authorization": f"Bearer {token}"}
    )
    return response.status, await response.json()


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deep_input_is_400_over_http_single_and_batch(edge: NatsApi, depth: int) -> None:
    token = await edge.token(f"enqueue:{JOB}", tenant=ORG_A)
    deep = an_input(nested(depth))
    status, body = await post(edge, f"/v1/jobs/{JOB}", b'{"input":' + deep + b"}", token)
    assert status == 400, body
    assert body["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(body["error"])
    batch = b'{"inputs":[' + an_input(key="fine") + b"," + deep + b"]}"
    status, body = await post(edge, f"/v1/jobs/{JOB}/batch", batch, token)
    assert status == 400, body
    assert body["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(body["error"])
    assert await edge.jobs() == []


async def test_the_depth_limit_is_exact(edge: NatsApi) -> None:
    token = await edge.token(f"enqueue:{JOB}", tenant=ORG_A)
    # The input object is one level: its data may hold MAX_JSON_DEPTH - 1 more.
    deepest = b'{"input":' + an_input(nested(MAX_JSON_DEPTH - 1)) + b"}"
    status, body = await post(edge, f"/v1/jobs/{JOB}", deepest, token)
    assert status == 202, body
    past = b'{"input":' + an_input(nested(MAX_JSON_DEPTH), key="past") + b"}"
    status, body = await post(edge, f"/v1/jobs/{JOB}", past, token)
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
    assert body["error"]["meta"]["issues"][0]["type"] == "depth"
    assert len(await edge.jobs()) == 1


@pytest.mark.parametrize("depth", DEPTHS)
async def test_a_deep_input_is_input_invalid_over_nats_request_reply(
    edge: NatsApi, depth: int
) -> None:
    token = await edge.token(f"enqueue:{JOB}", tenant=ORG_A)
    raw = b'{"input":' + an_input(nested(depth)) + b"}"
    reply = await edge.request(edge.names.enqueue_subject(JOB), None, token, raw=raw)
    assert reply["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(reply["error"])
    assert await edge.jobs() == []


async def listen(edge: NatsApi, subject: str) -> asyncio.Queue[dict[str, Any]]:
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def on_message(msg: Msg) -> None:
        await got.put(orjson.loads(msg.data))

    await edge.nc.subscribe(subject, cb=on_message)
    await edge.nc.flush()
    return got


@pytest.mark.parametrize("depth", [300, 1000])
async def test_a_deep_stream_message_is_rejected_not_retried(edge: NatsApi, depth: int) -> None:
    token = await edge.token(f"enqueue:{JOB}", tenant=ORG_A)
    rejected = await listen(edge, edge.names.rejected_subject(JOB))
    js = edge.nc.jetstream()
    raw = b'{"input":' + an_input(nested(depth)) + b"}"
    headers = {"Authorization": f"Bearer {token}", "Nats-Msg-Id": f"deep-{depth}"}
    ack = await js.publish(edge.names.js_enqueue_subject(JOB), raw, headers=headers)
    got = await asyncio.wait_for(rejected.get(), 20)
    assert got["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(got["error"])
    assert (got["streamSeq"], got["msgId"]) == (ack.seq, f"deep-{depth}")
    assert await edge.jobs() == []


async def test_a_deep_event_payload_is_400_over_http_and_nats(edge: NatsApi) -> None:
    token = await edge.token("events:publish")
    raw = b'{"payload":' + nested(MAX_JSON_DEPTH + 1) + b"}"
    status, body = await post(edge, "/v1/events/approved", raw, token)
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
    assert max_depth_named(body["error"])
    reply = await edge.request(edge.names.event_subject("approved"), None, token, raw=raw)
    assert reply["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(reply["error"])
    assert await edge.api.pool.fetchval("select count(*) from x_job_events") == 0


async def test_a_deep_event_on_the_stream_is_rejected(edge: NatsApi) -> None:
    token = await edge.token("events:publish")
    rejected = await listen(edge, edge.names.rejected_subject("events.approved"))
    raw = b'{"payload":' + nested(MAX_JSON_DEPTH + 1) + b"}"
    headers = {"Authorization": f"Bearer {token}"}
    await edge.nc.jetstream().publish(edge.names.js_event_subject("approved"), raw, headers=headers)
    got = await asyncio.wait_for(rejected.get(), 20)
    assert got["error"]["code"] == "X_INPUT_INVALID"
    assert max_depth_named(got["error"])
    assert await edge.api.pool.fetchval("select count(*) from x_job_events") == 0


INPUT_INVALID = "X_INPUT_INVALID"
LONG_FIELDS = [
    pytest.param({"tenant": incompressible(3000)}, {}, INPUT_INVALID, id="tenant-3000"),
    pytest.param({"tenant": "é" * 101}, {}, INPUT_INVALID, id="tenant-202-bytes"),
    pytest.param({"key": incompressible(3000)}, {}, "X_IDEMPOTENCY_REQUIRED", id="key-3000"),
    pytest.param({"key": "🙂" * 126}, {}, "X_IDEMPOTENCY_REQUIRED", id="key-504-bytes"),
    pytest.param({}, {"queue": "q" * 3000}, "X_JOB_DECLARATION_INVALID", id="queue-3000"),
    pytest.param({}, {"runId": "r" * 3000}, INPUT_INVALID, id="runId-3000"),
    pytest.param({}, {"runId": "é" * 101}, INPUT_INVALID, id="runId-202-bytes"),
]
"""A key and a queue keep the 400 codes they had; a tenant and a runId name their field."""


@pytest.mark.parametrize(("fields", "options", "code"), LONG_FIELDS)
async def test_a_field_past_its_length_is_400_before_any_statement(
    edge: NatsApi, fields: dict[str, str], options: dict[str, str], code: str
) -> None:
    token = await edge.token("admin")  # an operator: any tenant is its to queue
    body = {"input": {"tenant": ORG_A, "key": "k", **fields}, **options}
    status, answer = await edge.api.call("POST", f"/v1/jobs/{JOB}", token, body)
    assert (status, answer["error"]["code"]) == (400, code), answer
    if code == INPUT_INVALID:
        [issue] = answer["error"]["meta"]["issues"]
        assert issue["path"] == next(iter({**fields, **options}))
    reply = await edge.request(edge.names.enqueue_subject(JOB), body, token)
    assert reply["error"]["code"] == code
    assert await edge.jobs() == []


async def test_a_job_name_past_its_length_is_400(edge: NatsApi) -> None:
    token = await edge.token("admin")
    name = "n" * 201
    status, body = await edge.api.call("POST", f"/v1/jobs/{name}", token, {"input": {}})
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
    reply = await edge.request(edge.names.enqueue_subject(name), {"input": {}}, token)
    assert reply["error"]["code"] == "X_INPUT_INVALID"


@pytest.mark.parametrize("field", ["tenantId", "id"])
async def test_a_webhook_endpoints_tenant_or_id_past_its_length_is_400(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    monkeypatch: pytest.MonkeyPatch,
    field: str,
) -> None:
    monkeypatch.setenv("UJOBS_SECRET_KEY", base64.b64encode(os.urandom(32)).decode())
    monkeypatch.delenv("UJOBS_SECRET_KEY_FILE", raising=False)
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    token = await api.token("admin")
    body = {"url": "https://partner.example/hook", field: incompressible(3000)}
    status, answer = await api.call("POST", "/v1/webhooks/endpoints", token, body)
    assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID"), answer
    assert await pg_pool.fetchval("select count(*) from x_webhook_endpoints") == 0
