"""Black-box over HTTP: tenant B enqueuing tenant A's ``runId`` gets a run of its own. Its job
runs its own steps (never replays A's stored outputs), shows only its own steps, and B's
retry from a step leaves A's steps intact (issue 34, item 1)."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, make_api
from tests.services.tenant_steps_app import quote
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres import postgres_driver
from ujobs.execution.attempt import execute_job

RUN_ID = "order-42"


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(
        aiohttp_client, pg_dsn, pg_pool, UJOBS_APP="tests.services.tenant_steps_app:api"
    )


async def enqueue_and_run(api: Api, token: str, org: str, price: int) -> str:
    """Enqueue a quote under ``RUN_ID`` with ``token``, then run its one attempt as a worker."""
    body = {"input": {"org_id": org, "price": price}, "runId": RUN_ID}
    status, queued = await api.call("POST", "/v1/jobs/quote", token, body)
    assert status == 202, queued
    assert queued["runId"] == RUN_ID
    driver = postgres_driver(api.pool)
    [claimed] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    assert claimed.id == queued["id"]
    execution = await execute_job(claimed, driver=driver, handle=quote, context=None)
    assert execution.outcome == "completed", execution.error
    return str(queued["id"])


async def test_b_enqueuing_a_s_run_id_runs_its_own_steps_and_sees_only_them(api: Api) -> None:
    a = await api.token("enqueue:*", "read", tenant=ORG_A)
    b = await api.token("enqueue:*", "read", tenant=ORG_B)
    a_job = await enqueue_and_run(api, a, ORG_A, 100)
    b_job = await enqueue_and_run(api, b, ORG_B, 7)

    status, mine = await api.call("GET", f"/v1/jobs/{b_job}", b)
    assert status == 200, mine
    assert mine["progress"]["note"] == "quoted 7"  # not A's stored "quoted 100"
    assert [s["name"] for s in mine["steps"]] == ["price"]  # never A's "approval"

    status, theirs = await api.call("GET", f"/v1/jobs/{a_job}", a)
    assert status == 200, theirs
    assert theirs["progress"]["note"] == "quoted 100"
    assert [s["name"] for s in theirs["steps"]] == ["price", "approval"]


async def test_b_s_retry_from_a_step_leaves_a_s_steps(api: Api) -> None:
    a = await api.token("enqueue:*", "read", tenant=ORG_A)
    b = await api.token("enqueue:*", "read", "operate", tenant=ORG_B)
    a_job = await enqueue_and_run(api, a, ORG_A, 100)
    b_job = await enqueue_and_run(api, b, ORG_B, 7)

    # A step only A's run recorded is not one of B's: refused, and nothing of A's is dropped.
    status, refused = await api.call("POST", f"/v1/jobs/{b_job}/retry", b, {"fromStep": "approval"})
    assert (status, refused["error"]["code"]) == (404, "X_STEP_NOT_FOUND"), refused
    assert refused["error"]["meta"]["recorded"] == ["price"]
    status, moved = await api.call("POST", f"/v1/jobs/{b_job}/retry", b, {"fromStep": "price"})
    assert (status, moved["state"]) == (200, "ready")
    status, mine = await api.call("GET", f"/v1/jobs/{b_job}", b)
    assert (status, mine["steps"]) == (200, [])
    status, theirs = await api.call("GET", f"/v1/jobs/{a_job}", a)
    assert status == 200, theirs
    assert [s["name"] for s in theirs["steps"]] == ["price", "approval"]
