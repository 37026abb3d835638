"""``"priority"`` on ``POST /v1/jobs/{name}`` and ``/batch``: the run takes it (0 first, 9 last;
the job's declared one, 0, without it), ``GET /v1/jobs/{id}`` and the job list answer it, each
tenant reading only its own runs; out of range or of the wrong type is 400
``X_PRIORITY_INVALID`` and queues nothing, alone or in a batch."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres.driver import postgres_driver


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def test_a_run_takes_its_priority_and_each_tenant_reads_its_own(api: Api) -> None:
    a = await api.token("enqueue:send_mail", "read", tenant=ORG_A)
    b = await api.token("enqueue:send_mail", "read", tenant=ORG_B)
    status, low = await api.call("POST", "/v1/jobs/send_mail", a, {"input": mail(ORG_A)})
    assert status == 202
    status, urgent = await api.call(
        "POST",
        "/v1/jobs/send_mail",
        b,
        {"input": mail(ORG_B, subject="urgent"), "priority": 0},
    )
    assert status == 202
    status, batch = await api.call(
        "POST",
        "/v1/jobs/send_mail/batch",
        a,
        {"inputs": [mail(ORG_A, subject="later")], "priority": 9},
    )
    assert status == 202
    [later] = batch["jobs"]

    status, row = await api.call("GET", f"/v1/jobs/{later['id']}", a, None)
    assert (status, row["priority"]) == (200, 9)
    status, row = await api.call("GET", f"/v1/jobs/{low['id']}", a, None)
    assert (status, row["priority"]) == (200, 0)
    hidden = await api.call("GET", f"/v1/jobs/{urgent['id']}", a, None)
    assert (hidden[0], hidden[1]["error"]["code"]) == (404, "X_JOB_NOT_FOUND")
    status, page = await api.call("GET", "/v1/jobs", b, None)
    assert status == 200
    assert [(j["id"], j["priority"]) for j in page["jobs"]] == [(urgent["id"], 0)]
    status, page = await api.call("GET", "/v1/jobs", a, None)
    assert sorted((j["id"], j["priority"]) for j in page["jobs"]) == sorted(
        [(low["id"], 0), (later["id"], 9)]
    )


async def test_a_worker_claims_the_higher_priority_first(
    api: Api, pg_pool: asyncpg.Pool[Any]
) -> None:
    token = await api.token("enqueue:send_mail", tenant=ORG_A)
    _, low = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(subject="low"), "priority": 7}
    )
    _, high = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(subject="high"), "priority": 2}
    )
    driver = postgres_driver(pg_pool)
    claimed = await driver.claim(ClaimOptions(queues=["default"], limit=10, worker_id="w"))
    assert [(j.id, j.priority) for j in claimed] == [(high["id"], 2), (low["id"], 7)]


@pytest.mark.parametrize("value", [-1, 10, 1_000, "1", 1.5, True, [1], {"p": 1}])
async def test_a_bad_priority_is_400_x_priority_invalid_and_queues_nothing(
    api: Api, value: Any
) -> None:
    token = await api.token("enqueue:send_mail", tenant=ORG_A)
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(), "priority": value}
    )
    assert (status, body["error"]["code"]) == (400, "X_PRIORITY_INVALID")
    assert body["error"]["meta"]["field"] == "priority"
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail/batch", token, {"inputs": [mail()], "priority": value}
    )
    assert (status, body["error"]["code"]) == (400, "X_PRIORITY_INVALID")
    assert await api.jobs() == []
