"""``GET /v1/jobs/{id}`` with ``result``, ``GET /v1/jobs/{id}/result?wait=`` and the
enqueue-and-wait ``POST /v1/jobs/{name}?wait=``: answered by the settle's own announcement,
202 with the state when the wait runs out, tenancy as for reads.

The requests that wait are bounded by ``HANG_S`` (well under their ``wait``): one that is not
woken by the settle fails the test instead of answering late."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import orjson
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api
from ujobs.drivers.base import ClaimedJob, ClaimOptions, NackOptions
from ujobs.drivers.postgres import postgres_driver

HANG_S = 20.0


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def enqueue(api: Api, org: str = ORG_A, to: str = "a@x.io") -> str:
    token = await api.token("enqueue:*")
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(org, to)})
    assert status == 202, body
    return str(body["id"])


async def claim(pool: asyncpg.Pool[Any]) -> ClaimedJob:
    driver = postgres_driver(pool)
    claimed = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w1"))
    assert len(claimed) == 1
    return claimed[0]


async def settle(pool: asyncpg.Pool[Any], job: ClaimedJob, result: Any) -> None:
    driver = postgres_driver(pool)
    assert await driver.ack(job.id, job.ref, result=orjson.dumps(result).decode())
    await driver.close()


async def marked(pool: asyncpg.Pool[Any], job_id: str) -> None:
    """Until the waiting request has marked the row (its wait is then listening)."""
    while not await pool.fetchval("select result_waited from x_jobs where id = $1", job_id):
        await asyncio.sleep(0.01)


async def test_show_carries_the_result_once_done(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api)
    operator = await api.token("read")
    _, before = await api.call("GET", f"/v1/jobs/{job_id}", operator)
    assert before["result"] is None
    await settle(pg_pool, await claim(pg_pool), {"messageId": "m-1"})
    for token in (operator, await api.token("read", tenant=ORG_A)):
        status, body = await api.call("GET", f"/v1/jobs/{job_id}", token)
        assert status == 200
        assert (body["state"], body["result"]) == ("done", {"messageId": "m-1"})


async def test_a_live_job_answers_202_with_its_state(api: Api) -> None:
    job_id = await enqueue(api)
    token = await api.token("read")
    for query in ("", "?wait=0s"):
        status, body = await api.call("GET", f"/v1/jobs/{job_id}/result{query}", token)
        assert (status, body) == (
            202,
            {"id": job_id, "name": "send_mail", "state": "ready", "result": None, "error": None},
        )


async def test_a_wait_answers_the_moment_the_job_settles(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api)
    job = await claim(pg_pool)
    token = await api.token("read", tenant=ORG_A)
    waiting = asyncio.create_task(api.call("GET", f"/v1/jobs/{job_id}/result?wait=60s", token))
    await marked(pg_pool, job_id)
    await settle(pg_pool, job, [1, 2, 3])
    status, body = await asyncio.wait_for(waiting, HANG_S)
    assert status == 200
    assert body == {
        "id": job_id,
        "name": "send_mail",
        "state": "done",
        "result": [1, 2, 3],
        "error": None,
    }


async def test_a_dead_job_answers_its_error_code(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api)
    job = await claim(pg_pool)
    driver = postgres_driver(pg_pool)
    error = "X_MAIL_REFUSED: the relay said no\nTraceback (most recent call last):\n  secret.py"
    assert await driver.nack(job.id, job.ref, NackOptions(error=error, dead_letter=True))
    status, body = await api.call(
        "GET", f"/v1/jobs/{job_id}/result?wait=5s", await api.token("read")
    )
    assert status == 200
    assert body["state"] == "dead"
    assert body["error"] == {"code": "X_MAIL_REFUSED", "message": body["error"]["message"]}
    assert "the relay said no" in body["error"]["message"]
    assert "secret.py" not in body["error"]["message"]


@pytest.mark.parametrize(
    ("query", "path"),
    [("?wait=61s", "wait"), ("?wait=30", "wait"), ("?wait=soon", "wait"), ("?wiat=1s", "wiat")],
)
async def test_a_bad_wait_is_400(api: Api, query: str, path: str) -> None:
    job_id = await enqueue(api)
    token = await api.token("read")
    status, body = await api.call("GET", f"/v1/jobs/{job_id}/result{query}", token)
    assert status == 400
    assert body["error"]["code"] == "X_INPUT_INVALID"
    assert body["error"]["meta"]["issues"][0]["path"] == path


async def test_another_tenants_job_is_404_like_no_job_before_any_wait(
    api: Api, pg_pool: Any
) -> None:
    theirs = await enqueue(api, ORG_B, "b@x.io")
    await settle(pg_pool, await claim(pg_pool), {"secret": "of B"})
    mine = await api.token("read", tenant=ORG_A)
    status, body = await asyncio.wait_for(
        api.call("GET", f"/v1/jobs/{theirs}/result?wait=60s", mine), HANG_S
    )
    assert status == 404
    assert body["error"]["code"] == "X_JOB_NOT_FOUND"
    unknown = await api.call("GET", "/v1/jobs/no-such-id/result", mine)
    assert unknown[0] == 404
    assert unknown[1]["error"]["code"] == body["error"]["code"]
    assert "of B" not in str(body)
    owner = await api.token("read", tenant=ORG_B)
    status, body = await api.call("GET", f"/v1/jobs/{theirs}/result", owner)
    assert (status, body["result"]) == (200, {"secret": "of B"})


async def test_enqueue_and_wait_answers_the_result(api: Api, pg_pool: Any) -> None:
    token = await api.token("enqueue:send_mail", tenant=ORG_A)
    waiting = asyncio.create_task(
        api.call("POST", "/v1/jobs/send_mail?wait=60s", token, {"input": mail(ORG_A)})
    )
    while not await pool_has_job(pg_pool):
        await asyncio.sleep(0.01)
    # The wait marks the row right after the insert; a claim racing that update skips the
    # locked row (SKIP LOCKED), so claim once the mark has landed.
    job_id = await pg_pool.fetchval("select id from x_jobs")
    await marked(pg_pool, job_id)
    job = await claim(pg_pool)
    await settle(pg_pool, job, {"sent": True})
    status, body = await asyncio.wait_for(waiting, HANG_S)
    assert status == 200
    assert body == {
        "id": job.id,
        "runId": job.run_id,
        "deduped": False,
        "debounced": False,
        "name": "send_mail",
        "state": "done",
        "result": {"sent": True},
        "error": None,
    }


async def pool_has_job(pool: asyncpg.Pool[Any]) -> bool:
    return bool(await pool.fetchval("select count(*) from x_jobs"))


async def test_enqueue_and_wait_answers_202_with_the_id_when_time_runs_out(api: Api) -> None:
    token = await api.token("enqueue:send_mail")
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail?wait=0s", token, {"input": mail(ORG_A)}
    )
    assert status == 202
    assert body["state"] == "ready"
    assert (body["result"], body["error"], body["deduped"]) == (None, None, False)
    assert body["debounced"] is False
    rows = await api.jobs()
    assert [r["id"] for r in rows] == [body["id"]]


async def test_the_wait_cap_is_the_apis_setting(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, UJOBS_API_MAX_WAIT_MS="2000")
    job_id = await enqueue(api)
    token = await api.token("read")
    status, body = await api.call("GET", f"/v1/jobs/{job_id}/result?wait=3s", token)
    assert (status, body["error"]["meta"]["issues"][0]["message"]) == (400, "at most 2000 ms")
    status, _ = await api.call("GET", f"/v1/jobs/{job_id}/result?wait=0s", token)
    assert status == 202


async def test_enqueue_with_a_bad_wait_queues_nothing(api: Api) -> None:
    token = await api.token("enqueue:send_mail")
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail?wait=2m", token, {"input": mail(ORG_A)}
    )
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
    assert await api.jobs() == []


async def test_the_openapi_document_names_each_declared_output(api: Api) -> None:
    response = await api.client.get("/v1/openapi.json")
    doc = await response.json()
    schemas = doc["components"]["schemas"]
    assert schemas["Output_send_mail"]["properties"]["messageId"]["type"] == "string"
    assert schemas["ResultOf_send_mail"]["properties"]["result"] == {
        "anyOf": [{"$ref": "#/components/schemas/Output_send_mail"}, {"type": "null"}]
    }
    assert schemas["EnqueuedResult_send_mail"] == {
        "allOf": [
            {"$ref": "#/components/schemas/EnqueuedResult"},
            {"$ref": "#/components/schemas/ResultOf_send_mail"},
        ]
    }
    typed = doc["paths"]["/v1/jobs/send_mail"]["post"]
    assert typed["responses"]["200"]["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/EnqueuedResult_send_mail"
    }
    assert [p["name"] for p in typed["parameters"]] == ["wait"]
    untyped = doc["paths"]["/v1/jobs/refund"]["post"]["responses"]["200"]
    assert untyped["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/EnqueuedResult"
    }
    result = doc["paths"]["/v1/jobs/{job}/result"]["get"]["responses"]
    assert {"200", "202", "400", "404"} <= set(result)
