"""``POST /v1/jobs/{name}``, ``/batch`` and ``/v1/events/{name}``: every status, tenancy, and
the same validation, dedupe and attribution as ``job.enqueue``."""

from __future__ import annotations

from typing import Any

import asyncpg
import orjson
import pytest
from prometheus_client import CollectorRegistry

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api
from ujobs.clock import FrozenClock
from ujobs.masking import MASK
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.api.common import EDGE
from ujobs.services.api.enqueue import MAX_BATCH_INPUTS
from ujobs.services.config.settings import ApiConfig


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def test_enqueue_is_202_and_dedupes_on_the_jobs_own_key(api: Api) -> None:
    token = await api.issue("enqueue:send_mail", tenant=ORG_A)
    status, body = await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()})
    assert status == 202
    assert set(body) == {"id", "runId", "deduped", "debounced"}
    assert body["deduped"] is False
    [row] = await api.jobs()
    assert row["id"] == body["id"]
    assert row["run_id"] == body["runId"]
    assert row["tenant_id"] == ORG_A
    assert row["idempotency_key"] == "mail:a@example.com:hi"
    assert row["enqueued_by"] == token.record.id
    assert row["max_attempts"] == 5
    assert orjson.loads(row["input"]) == mail()
    again = await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()})
    assert again == (202, {**body, "deduped": True})
    assert len(await api.jobs()) == 1


async def test_on_conflict_error_is_409_naming_the_live_run(api: Api) -> None:
    token = await api.token("enqueue:send_mail", tenant=ORG_A)
    first = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail()})
    assert first[0] == 202
    strict = {"input": mail(), "onConflict": "error"}
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, strict)
    assert status == 409
    assert body["error"]["code"] == "X_JOB_DUPLICATE"
    assert body["error"]["meta"]["id"] == first[1]["id"]
    held = await api.jobs()
    assert len(held) == 1  # the refusal queued nothing
    # The key is computed from the input: masked as every document masks it.
    key = held[0]["idempotency_key"]
    assert key
    assert key not in orjson.dumps(body).decode()
    assert body["error"]["meta"]["idempotency_key"] == MASK
    # The default (and "dedupe" said out loud) still answers the live run.
    for mode in ({}, {"onConflict": "dedupe"}):
        again = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(), **mode})
        assert again == (202, {**first[1], "deduped": True})
    fresh = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(to="b@x.io"), "onConflict": "error"}
    )
    assert fresh[0] == 202
    assert fresh[1]["deduped"] is False
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(), "onConflict": "ignore"}
    )
    assert (status, body["error"]["meta"]["issues"][0]["path"]) == (400, "onConflict")


async def test_on_conflict_error_refuses_a_batch_naming_each_held_index(api: Api) -> None:
    token = await api.token("enqueue:send_mail", tenant=ORG_A)
    held = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail()})
    assert held[0] == 202
    path = "/v1/jobs/send_mail/batch"
    inputs = [mail(to="x1@example.com"), mail(), mail(to="x2@example.com")]
    strict = {"inputs": inputs, "onConflict": "error"}
    status, body = await api.call("POST", path, token, strict)
    assert (status, body["error"]["code"]) == (409, "X_JOB_DUPLICATE")
    [failure] = body["error"]["meta"]["failures"]
    assert (failure["index"], failure["code"]) == (1, "X_JOB_DUPLICATE")
    assert failure["meta"] == {"id": held[1]["id"]}
    assert "nothing was queued" in body["error"]["message"]
    assert len(await api.jobs()) == 1  # the two new inputs were not queued either

    repeated = {"inputs": [mail(to="y@example.com")] * 2, "onConflict": "error"}
    status, body = await api.call("POST", path, token, repeated)
    assert status == 409
    assert [(f["index"], f["meta"]) for f in body["error"]["meta"]["failures"]] == [
        (1, {"sameAs": 0})
    ]
    assert len(await api.jobs()) == 1

    fresh = {"inputs": [inputs[0], inputs[2]], "onConflict": "error"}
    status, body = await api.call("POST", path, token, fresh)
    assert status == 202
    assert [job["deduped"] for job in body["jobs"]] == [False, False]
    assert {row["id"] for row in await api.jobs()} == {held[1]["id"]} | {
        job["id"] for job in body["jobs"]
    }
    # Without onConflict the batch still dedupes input by input.
    status, body = await api.call("POST", path, token, {"inputs": inputs})
    assert status == 202
    assert [job["deduped"] for job in body["jobs"]] == [True, True, True]


async def test_delay_queue_and_run_id(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: Any
) -> None:
    clock = FrozenClock()
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock)
    token = await api.token("enqueue:*")
    status, body = await api.call(
        "POST",
        "/v1/jobs/notify",
        token,
        {"input": {"user_id": ORG_B, "items": []}, "delay": "1h", "queue": "slow", "runId": "r-1"},
    )
    assert status == 202
    assert body["runId"] == "r-1"
    row = await pg_pool.fetchrow(
        "select state, queue, (extract(epoch from run_at) * 1000)::bigint as run_at_ms from x_jobs"
    )
    assert (row["state"], row["queue"]) == ("delayed", "slow")
    assert row["run_at_ms"] == clock.now_ms() + 3_600_000


async def test_a_tenant_token_queues_only_its_own_tenants_work(api: Api) -> None:
    token = await api.token("enqueue:*", tenant=ORG_A)
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(ORG_B)})
    assert status == 403
    assert body["error"]["code"] == "X_TENANCY_ACTOR_MISMATCH"
    assert await api.jobs() == []
    operator = await api.token("enqueue:*")
    assert (await api.call("POST", "/v1/jobs/send_mail", operator, {"input": mail(ORG_B)}))[
        0
    ] == 202


async def test_a_tenant_free_job_takes_any_tenants_token_stamped_with_its_tenant(
    api: Api,
) -> None:
    """``tenant="none"`` (``notify``): ``enqueue:<job>`` is the gate, for every tenant's token;
    the row is stamped with the token's tenant as ``job.as_(actor)`` stamps the actor's org,
    so each tenant reads its own row and keeps its own idempotency keys."""
    a = await api.token("enqueue:notify", "read", tenant=ORG_A)
    b = await api.token("enqueue:notify", "read", tenant=ORG_B)
    same = {"input": {"user_id": ORG_A, "items": []}}
    first_a = await api.call("POST", "/v1/jobs/notify", a, same)
    first_b = await api.call("POST", "/v1/jobs/notify", b, same)
    assert (first_a[0], first_b[0]) == (202, 202)
    # One key, two tenants: two rows, neither deduped onto the other tenant's.
    assert first_a[1]["deduped"] is False
    assert first_b[1]["deduped"] is False
    assert first_a[1]["id"] != first_b[1]["id"]
    rows = {r["id"]: r["tenant_id"] for r in await api.jobs()}
    assert rows == {first_a[1]["id"]: ORG_A, first_b[1]["id"]: ORG_B}
    # Each tenant reads its own run; the other's is an unknown id.
    assert (await api.call("GET", f"/v1/jobs/{first_a[1]['id']}", a, None))[0] == 200
    hidden = await api.call("GET", f"/v1/jobs/{first_a[1]['id']}", b, None)
    assert (hidden[0], hidden[1]["error"]["code"]) == (404, "X_JOB_NOT_FOUND")
    # The same in a batch; a token without enqueue:notify still gets 403.
    batch = await api.call("POST", "/v1/jobs/notify/batch", b, {"inputs": [same["input"]]})
    assert batch == (202, {"jobs": [{**first_b[1], "deduped": True}]})
    other = await api.token("enqueue:send_mail", tenant=ORG_A)
    refused = await api.call("POST", "/v1/jobs/notify", other, same)
    assert (refused[0], refused[1]["error"]["code"]) == (403, "X_FORBIDDEN")
    # An operator's token leaves the row tenant-free.
    operator = await api.token("enqueue:notify")
    free = await api.call("POST", "/v1/jobs/notify", operator, same)
    assert free[0] == 202
    assert {r["id"]: r["tenant_id"] for r in await api.jobs()}[free[1]["id"]] is None


async def test_unauthorized(api: Api) -> None:
    for token in (None, "ujobs_nope"):
        status, body = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail()})
        assert status == 401
        assert body["error"]["code"] == "X_UNAUTHORIZED"
    raw = await api.client.post(
        "/v1/jobs/send_mail", json={"input": mail()}, headers={"Authorization": "Basic x"}
    )
    assert raw.status == 401


async def test_revocation_and_expiry_hold_from_the_next_request(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: Any
) -> None:
    clock = FrozenClock()
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock)
    revoked = await api.issue("enqueue:*")
    assert (await api.call("POST", "/v1/jobs/send_mail", revoked.secret, {"input": mail()}))[
        0
    ] == 202
    await api.tokens.revoke(revoked.record.id)
    status, body = await api.call("POST", "/v1/jobs/send_mail", revoked.secret, {"input": mail()})
    assert status == 401
    assert "revoked" in body["error"]["message"]
    expiring = await api.token("enqueue:*", expires_in_ms=1_000)
    assert (await api.call("POST", "/v1/jobs/send_mail", expiring, {"input": mail()}))[0] == 202
    clock.advance(1_000)
    status, body = await api.call("POST", "/v1/jobs/send_mail", expiring, {"input": mail()})
    assert status == 401
    assert "expired" in body["error"]["message"]


async def test_a_missing_scope_is_403(api: Api) -> None:
    token = await api.token("enqueue:notify", "read")
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail()})
    assert status == 403
    assert body["error"]["code"] == "X_FORBIDDEN"
    assert body["error"]["meta"]["scope"] == "enqueue:send_mail"
    events = await api.call("POST", "/v1/events/paid", token, {"payload": {}})
    assert events[0] == 403


async def test_an_unknown_job_is_404(api: Api) -> None:
    token = await api.token("enqueue:*")
    status, body = await api.call("POST", "/v1/jobs/no_such_job", token, {"input": {}})
    assert status == 404
    assert body["error"]["code"] == "X_JOB_UNKNOWN"


@pytest.mark.parametrize(
    ("data", "path"),
    [
        (b"{not json", ""),
        (b"", ""),
        (b"[1, 2]", ""),
        (orjson.dumps({"input": mail(), "urgency": 1}), "urgency"),
        (orjson.dumps({"input": {"to": "a@example.com", "org_id": ORG_A}}), "subject"),
        (orjson.dumps({"input": mail(org="not-a-uuid")}), "org_id"),
        (orjson.dumps({"input": mail(), "delay": "3 days"}), "delay"),
        (orjson.dumps({"input": mail(), "delay": True}), "delay"),
        (orjson.dumps({"input": mail(), "delay": -5}), "delay"),
        (orjson.dumps({"input": mail(), "delay": 9_000_000_000_000_000_000}), "delay"),
        (orjson.dumps({"input": mail(), "runId": 7}), "runId"),
        (orjson.dumps({"input": mail(), "queue": "bad queue"}), None),
    ],
)
async def test_bad_input_is_400_naming_the_field(api: Api, data: bytes, path: str | None) -> None:
    token = await api.token("enqueue:*")
    response = await api.client.post(
        "/v1/jobs/send_mail",
        data=data,
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    assert response.status == 400
    error = (await response.json())["error"]
    assert error["code"] in {"X_INPUT_INVALID", "X_JOB_DECLARATION_INVALID"}
    if path is not None:
        assert path in orjson.dumps(error["meta"]).decode()
    assert await api.jobs() == []


async def test_a_body_over_the_limit_is_413(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: Any
) -> None:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, UJOBS_API_MAX_BODY_BYTES="2048")
    token = await api.token("enqueue:*")
    big = {"input": mail(subject="x" * 4_000)}
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, big)
    assert status == 413
    assert body["error"]["code"] == "X_BODY_TOO_LARGE"
    assert body["error"]["meta"]["max"] == 2048

    async def chunks() -> Any:
        yield orjson.dumps(big)

    chunked = await api.client.post(
        "/v1/jobs/send_mail", data=chunks(), headers={"Authorization": f"Bearer {token}"}
    )
    assert chunked.status == 413
    assert (await chunked.json())["error"]["code"] == "X_BODY_TOO_LARGE"
    assert await api.jobs() == []


async def test_batch_answers_in_order_through_enqueue_many(api: Api) -> None:
    token = await api.issue("enqueue:send_mail", tenant=ORG_A)
    inputs = [mail(to="a@x.io"), mail(to="b@x.io"), mail(to="a@x.io")]
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail/batch", token.secret, {"inputs": inputs}
    )
    assert status == 202
    jobs = body["jobs"]
    assert [j["deduped"] for j in jobs] == [False, False, True]
    assert jobs[2]["id"] == jobs[0]["id"]
    rows = await api.jobs()
    assert sorted(r["id"] for r in rows) == sorted({j["id"] for j in jobs})
    assert {r["enqueued_by"] for r in rows} == {token.record.id}


async def test_a_refused_input_refuses_the_batch_naming_every_index(api: Api) -> None:
    token = await api.token("enqueue:*", tenant=ORG_A)
    bad = [mail(), {"to": "x@y.z"}, mail(to="b@x.io"), {"org_id": ORG_A}]
    status, body = await api.call("POST", "/v1/jobs/send_mail/batch", token, {"inputs": bad})
    assert status == 400
    assert body["error"]["code"] == "X_INPUT_INVALID"
    assert [f["index"] for f in body["error"]["meta"]["failures"]] == [1, 3]
    assert {f["code"] for f in body["error"]["meta"]["failures"]} == {"X_INPUT_INVALID"}
    crossed = [mail(), mail(ORG_B), {"to": "x@y.z"}]
    status, body = await api.call("POST", "/v1/jobs/send_mail/batch", token, {"inputs": crossed})
    assert status == 403
    assert body["error"]["code"] == "X_TENANCY_ACTOR_MISMATCH"
    failures = body["error"]["meta"]["failures"]
    assert [(f["index"], f["code"]) for f in failures] == [
        (1, "X_TENANCY_ACTOR_MISMATCH"),
        (2, "X_INPUT_INVALID"),
    ]
    assert await api.jobs() == []


@pytest.mark.parametrize("inputs", [[], {"a": 1}, [{}] * (MAX_BATCH_INPUTS + 1)])
async def test_batch_size_and_shape(api: Api, inputs: Any) -> None:
    token = await api.token("enqueue:*")
    status, body = await api.call("POST", "/v1/jobs/notify/batch", token, {"inputs": inputs})
    assert status == 400
    assert body["error"]["code"] == "X_INPUT_INVALID"


async def test_publish_an_event(api: Api) -> None:
    token = await api.token("events:publish", tenant=ORG_A)
    status, body = await api.call("POST", "/v1/events/invoice.paid", token, {"payload": {"n": 1}})
    assert status == 202
    assert body["name"] == "invoice.paid"
    row = await api.pool.fetchrow("select id, name, payload from x_job_events")
    assert row is not None
    assert (row["id"], row["name"], orjson.loads(row["payload"])) == (
        body["id"],
        "invoice.paid",
        {"n": 1},
    )
    unknown = await api.call("POST", "/v1/events/x", token, {"payload": 1, "extra": 2})
    assert unknown[0] == 400


async def test_without_postgres_every_authenticated_call_is_503(
    aiohttp_client: MakeClient, redis_url: str, redis_prefix: str
) -> None:
    """The Redis driver alone: the queue works, but tokens live in Postgres."""
    config = ApiConfig.load(
        {
            "UJOBS_DRIVER": "redis",
            "REDIS_URL": redis_url,
            "UJOBS_REDIS_PREFIX": redis_prefix,
            "UJOBS_APP": "tests.unit.sample_app:api",
        }
    )
    client = await aiohttp_client(create_app(config, metrics=JobMetrics(CollectorRegistry())))
    response = await client.post(
        "/v1/jobs/send_mail", json={"input": mail()}, headers={"Authorization": "Bearer ujobs_x"}
    )
    assert response.status == 503
    body = await response.json()
    assert body["error"]["code"] == "X_DRIVER_UNAVAILABLE"
    assert body["error"]["meta"] == {"variable": "DATABASE_URL"}
    assert (await client.get("/healthz")).status == 200


async def test_on_a_redis_queue_tokens_are_read_per_request_and_a_strict_batch_is_501(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    redis_url: str,
    redis_prefix: str,
) -> None:
    """Jobs in Redis, tokens in Postgres: no statement holds both, so the single enqueue reads
    its token every time (a revoke holds) and the all-or-none batch is not offered."""
    api = await make_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        UJOBS_DRIVER="redis",
        REDIS_URL=redis_url,
        UJOBS_REDIS_PREFIX=redis_prefix,
    )
    app = api.client.app
    assert app is not None
    assert (app[EDGE].known, app[EDGE].strict, app[EDGE].batcher.guard) == (None, None, None)
    token = await api.issue("enqueue:send_mail", tenant=ORG_A)
    assert (await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()}))[0] == 202
    await api.tokens.revoke(token.record.id)
    again = await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail(to="b@x.io")})
    assert again[0] == 401
    live = await api.token("enqueue:send_mail", tenant=ORG_A)
    strict = {"inputs": [mail(to="c@x.io")], "onConflict": "error"}
    status, body = await api.call("POST", "/v1/jobs/send_mail/batch", live, strict)
    assert (status, body["error"]["code"]) == (501, "X_NOT_IMPLEMENTED")


async def test_a_nul_character_is_400_never_500(api: Api) -> None:
    token = await api.token("enqueue:*", "events:publish", "read")
    refused = [
        await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(subject="a\u0000")}),
        await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(), "runId": "r\u0000"}),
        await api.call("POST", "/v1/events/paid", token, {"payload": {"note": "a\u0000b"}}),
        await api.call("GET", "/v1/jobs?name=a%00b", token),
        await api.call("GET", "/v1/jobs/a%00b", token),
    ]
    assert [(status, body["error"]["code"]) for status, body in refused] == [
        (400, "X_INPUT_INVALID")
    ] * 5
    assert await api.jobs() == []
