"""Request/reply on ``<prefix>.enqueue.<job>`` and ``<prefix>.events.<name>`` against a real
nats-server: the HTTP edge's validation, dedupe, attribution, scopes, tenancy and codes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import asyncpg
import orjson
import pytest

from tests.services.api_support import ORG_A, ORG_B, MakeClient, mail, make_api
from tests.services.nats_support import NatsApi, start_nats_api
from tests.support.servers import free_port
from ujobs.errors import DriverUnavailableError
from ujobs.services.api.common import EDGE
from ujobs.services.api.token_facts import KnownTokens


@pytest.fixture
async def edge(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> AsyncIterator[NatsApi]:
    async for started in start_nats_api(aiohttp_client, pg_dsn, pg_pool, nats_url):
        yield started


async def test_request_enqueues_after_commit_and_dedupes(edge: NatsApi) -> None:
    issued = await edge.api.issue("enqueue:send_mail", tenant=ORG_A)
    subject = edge.names.enqueue_subject("send_mail")
    body = await edge.request(subject, {"input": mail()}, issued.secret)
    assert set(body) == {"id", "runId", "deduped", "debounced"}
    assert body["deduped"] is False
    [row] = await edge.jobs()  # committed before the reply was sent
    assert row["id"] == body["id"]
    assert row["tenant_id"] == ORG_A
    assert row["enqueued_by"] == issued.record.id
    assert orjson.loads(row["input"]) == mail()
    again = await edge.request(subject, {"input": mail()}, issued.secret)
    assert again == {**body, "deduped": True}
    assert len(await edge.jobs()) == 1


async def test_a_jetstream_publish_on_the_request_subject_is_a_request_not_stored(
    edge: NatsApi,
) -> None:
    """What the README tells producers: the stream captures ``<prefix>.js.…`` only, so a
    JetStream publish to the request subject is answered by the api (no publish ack) and its
    ``Nats-Msg-Id`` is not read: a second publish under the same id queues a second run."""
    token = await edge.token("enqueue:*")
    subject = edge.names.enqueue_subject("send_mail")
    js = edge.nc.jetstream()
    replies = []
    for to in ("a@example.com", "b@example.com"):
        reply = await edge.nc.request(
            subject,
            orjson.dumps({"input": mail(to=to)}),
            timeout=10,
            headers={"Authorization": f"Bearer {token}", "Nats-Msg-Id": "same-id"},
        )
        replies.append(orjson.loads(reply.data))
    # Enqueue answers, not {"stream", "seq"}.
    assert [set(r) for r in replies] == [{"id", "runId", "deduped", "debounced"}] * 2
    assert len(await edge.jobs()) == 2
    info = await js.stream_info(edge.names.enqueue_stream)
    assert info.state.messages == 0
    assert info.state.last_seq == 0  # nothing stored, ever


async def test_request_takes_run_id_delay_and_queue(edge: NatsApi) -> None:
    token = await edge.token("enqueue:*")
    body = await edge.request(
        edge.names.enqueue_subject("notify"),
        {"input": {"user_id": ORG_B, "items": []}, "runId": "r-9", "delay": "1h", "queue": "slow"},
        token,
    )
    assert body["runId"] == "r-9"
    [row] = await edge.jobs()
    assert (row["state"], row["queue"], row["run_id"]) == ("delayed", "slow", "r-9")


async def test_request_takes_a_priority(edge: NatsApi) -> None:
    token = await edge.token("enqueue:*", tenant=ORG_A)
    subject = edge.names.enqueue_subject("send_mail")
    body = await edge.request(subject, {"input": mail(), "priority": 3}, token)
    plain = await edge.request(subject, {"input": mail(subject="plain")}, token)
    rows = {r["id"]: r["priority"] for r in await edge.jobs()}
    assert rows == {body["id"]: 3, plain["id"]: 0}


@pytest.mark.parametrize(
    ("subject_job", "payload", "raw", "code"),
    [
        ("send_mail", {"input": {"to": "x"}}, None, "X_INPUT_INVALID"),
        ("send_mail", None, b"{not json", "X_INPUT_INVALID"),
        ("send_mail", None, b"[1]", "X_INPUT_INVALID"),
        ("send_mail", {"input": mail(), "extra": 1}, None, "X_INPUT_INVALID"),
        ("send_mail", {"input": mail(), "delay": "soon"}, None, "X_INPUT_INVALID"),
        ("send_mail", {"input": mail(), "priority": 10}, None, "X_PRIORITY_INVALID"),
        ("send_mail", {"input": mail(), "priority": "high"}, None, "X_PRIORITY_INVALID"),
        ("no_such_job", {"input": {}}, None, "X_JOB_UNKNOWN"),
    ],
)
async def test_bad_requests_answer_the_http_edges_codes(
    edge: NatsApi, subject_job: str, payload: Any, raw: bytes | None, code: str
) -> None:
    token = await edge.token("enqueue:*", tenant=ORG_A)
    body = await edge.request(edge.names.enqueue_subject(subject_job), payload, token, raw=raw)
    assert body["error"]["code"] == code
    assert set(body["error"]) == {"code", "message", "meta"}
    assert await edge.jobs() == []


async def test_credentials_scopes_and_tenancy(edge: NatsApi) -> None:
    subject = edge.names.enqueue_subject("send_mail")
    missing = await edge.request(subject, {"input": mail()}, None)
    assert missing["error"]["code"] == "X_UNAUTHORIZED"
    unknown = await edge.request(subject, {"input": mail()}, "ujobs_nope")
    assert unknown["error"]["code"] == "X_UNAUTHORIZED"
    other_job = await edge.token("enqueue:notify", tenant=ORG_A)
    forbidden = await edge.request(subject, {"input": mail()}, other_job)
    assert forbidden["error"]["code"] == "X_FORBIDDEN"
    tenant_b = await edge.token("enqueue:send_mail", tenant=ORG_B)
    crossed = await edge.request(subject, {"input": mail(ORG_A)}, tenant_b)
    assert crossed["error"]["code"] == "X_TENANCY_ACTOR_MISMATCH"
    assert crossed["error"]["meta"]["actor_org"] == ORG_B
    revoked = await edge.api.issue("enqueue:send_mail", tenant=ORG_A)
    await edge.api.tokens.revoke(revoked.record.id)
    gone = await edge.request(subject, {"input": mail()}, revoked.secret)
    assert gone["error"]["code"] == "X_UNAUTHORIZED"
    assert await edge.jobs() == []
    operator = await edge.token("enqueue:send_mail")
    assert "id" in await edge.request(subject, {"input": mail(ORG_B)}, operator)


async def test_a_tenant_free_job_takes_each_tenants_token_over_nats_as_over_http(
    edge: NatsApi,
) -> None:
    """``notify`` is ``tenant="none"``: any tenant's ``enqueue:notify`` token queues it, the
    row stamped with that tenant (docs/guides/security.md)."""
    subject = edge.names.enqueue_subject("notify")
    body = {"input": {"user_id": ORG_A, "items": []}}
    a = await edge.request(subject, body, await edge.token("enqueue:notify", tenant=ORG_A))
    b = await edge.request(subject, body, await edge.token("enqueue:notify", tenant=ORG_B))
    assert (a["deduped"], b["deduped"]) == (False, False)
    rows = {r["id"]: r["tenant_id"] for r in await edge.jobs()}
    assert rows == {a["id"]: ORG_A, b["id"]: ORG_B}


async def test_on_conflict_error_refuses_a_live_run_as_http_does(edge: NatsApi) -> None:
    issued = await edge.api.issue("enqueue:send_mail", tenant=ORG_A)
    subject = edge.names.enqueue_subject("send_mail")
    first = await edge.request(subject, {"input": mail(), "onConflict": "error"}, issued.secret)
    assert first["deduped"] is False
    again = await edge.request(subject, {"input": mail(), "onConflict": "error"}, issued.secret)
    assert again["error"]["code"] == "X_JOB_DUPLICATE"
    assert again["error"]["meta"]["id"] == first["id"]
    deduped = await edge.request(subject, {"input": mail(), "onConflict": "dedupe"}, issued.secret)
    assert deduped == {**first, "deduped": True}
    wrong = await edge.request(subject, {"input": mail(), "onConflict": "skip"}, issued.secret)
    assert wrong["error"]["code"] == "X_INPUT_INVALID"
    assert wrong["error"]["meta"]["issues"][0]["path"] == "onConflict"
    assert [row["id"] for row in await edge.jobs()] == [first["id"]]


def _known(edge: NatsApi) -> KnownTokens:
    app = edge.api.client.app
    assert app is not None
    cache = app[EDGE].known
    assert cache is not None
    return cache


async def test_a_token_seen_live_is_checked_in_the_insert_not_read_again(edge: NatsApi) -> None:
    """The request form keeps a token's fixed facts as HTTP does (the same cache): a revoke
    still holds from the next request, which queues nothing, and before any other refusal."""
    issued = await edge.api.issue("enqueue:send_mail", tenant=ORG_A)
    subject = edge.names.enqueue_subject("send_mail")
    first = await edge.request(subject, {"input": mail()}, issued.secret)
    assert first["deduped"] is False
    assert _known(edge).get(issued.secret) is not None
    await edge.api.tokens.revoke(issued.record.id)
    refused = await edge.request(subject, {"input": {"to": 1}}, issued.secret)
    assert refused["error"]["code"] == "X_UNAUTHORIZED"  # not the input's 400
    gone = await edge.request(subject, {"input": mail(to="b@example.com")}, issued.secret)
    assert gone["error"]["code"] == "X_UNAUTHORIZED"
    assert "revoked" in gone["error"]["message"]
    assert _known(edge).get(issued.secret) is None
    assert [row["id"] for row in await edge.jobs()] == [first["id"]]


async def test_event_request_publishes(edge: NatsApi) -> None:
    token = await edge.token("events:publish", tenant=ORG_A)
    body = await edge.request(
        edge.names.event_subject("invoice.paid"), {"payload": {"n": 1}}, token
    )
    assert body["name"] == "invoice.paid"
    row = await edge.api.pool.fetchrow("select id, name, payload from x_job_events")
    assert row is not None
    assert (row["id"], row["name"], orjson.loads(row["payload"])) == (
        body["id"],
        "invoice.paid",
        {"n": 1},
    )


async def test_event_request_refusals(edge: NatsApi) -> None:
    subject = edge.names.event_subject("paid")
    no_scope = await edge.token("enqueue:*")
    assert (await edge.request(subject, {"payload": {}}, no_scope))["error"][
        "code"
    ] == "X_FORBIDDEN"
    token = await edge.token("events:publish")
    extra = await edge.request(subject, {"payload": 1, "x": 2}, token)
    assert extra["error"]["code"] == "X_INPUT_INVALID"
    nul = await edge.request(subject, {"payload": {"note": "a\u0000b"}}, token)
    assert nul["error"]["code"] == "X_INPUT_INVALID"
    long_name = await edge.request(edge.names.event_subject("e" * 201), {"payload": 1}, token)
    assert long_name["error"]["code"] == "X_INPUT_INVALID"
    count = await edge.api.pool.fetchval("select count(*) from x_job_events")
    assert count == 0


async def test_an_unreachable_nats_stops_the_api_at_start_naming_nats_url(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    nowhere = f"nats://127.0.0.1:{free_port()}"
    with pytest.raises(DriverUnavailableError) as caught:
        await make_api(aiohttp_client, pg_dsn, pg_pool, NATS_URL=nowhere)
    assert caught.value.meta == {"variable": "NATS_URL"}


async def test_parent_id_over_nats_takes_an_operator_token_as_over_http(edge: NatsApi) -> None:
    subject = edge.names.enqueue_subject("send_mail")
    operator = await edge.token("enqueue:send_mail")
    parent = await edge.request(subject, {"input": mail(ORG_A, to="p@x.io")}, operator)
    tenant = await edge.token("enqueue:send_mail", tenant=ORG_A)
    refused = await edge.request(
        subject, {"input": mail(ORG_A, to="c@x.io"), "parentId": parent["id"]}, tenant
    )
    assert refused["error"]["code"] == "X_FORBIDDEN"
    missing = await edge.request(
        subject, {"input": mail(ORG_A, to="c@x.io"), "parentId": "no-such-job"}, operator
    )
    assert missing["error"]["code"] == "X_JOB_NOT_FOUND"
    child = await edge.request(
        subject, {"input": mail(ORG_A, to="c@x.io"), "parentId": parent["id"]}, operator
    )
    rows = {r["id"]: r for r in await edge.jobs()}
    assert set(rows) == {parent["id"], child["id"]}
    assert (rows[child["id"]]["parent_id"], rows[child["id"]]["tenant_id"]) == (
        parent["id"],
        ORG_A,
    )
