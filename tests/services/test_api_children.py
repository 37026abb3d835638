"""``parentId`` on ``POST /v1/jobs/{name}``: an operator token records the new job as a child
(it takes its parent's tenant and shows on the parent's page); a tenant token is 403
``X_FORBIDDEN``; a missing parent is 404 as a missing job."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def _enqueue(api: Api, token: str, body: dict[str, Any]) -> tuple[int, Any]:
    return await api.call("POST", "/v1/jobs/send_mail", token, body)


async def test_an_operator_names_a_parent_and_the_child_shows_on_its_page(api: Api) -> None:
    operator = await api.token("enqueue:*", "read")
    status, parent = await _enqueue(api, operator, {"input": mail(ORG_A, to="p@x.io")})
    assert status == 202, parent
    status, child = await _enqueue(
        api, operator, {"input": mail(ORG_A, to="c@x.io"), "parentId": parent["id"]}
    )
    assert status == 202, child
    status, doc = await api.call("GET", f"/v1/jobs/{child['id']}", operator)
    assert (status, doc["parentId"], doc["tenantId"]) == (200, parent["id"], ORG_A)
    status, doc = await api.call("GET", f"/v1/jobs/{parent['id']}", operator)
    assert [c["id"] for c in doc["children"]["items"]] == [child["id"]]
    assert doc["children"]["total"] == 1
    tenant = await api.token("read", tenant=ORG_A)
    status, doc = await api.call("GET", f"/v1/jobs/{parent['id']}", tenant)
    assert (status, doc["children"]["total"]) == (200, 1)


async def test_a_tenant_token_naming_a_parent_is_403_and_queues_nothing(api: Api) -> None:
    operator = await api.token("enqueue:*", "read")
    _, parent = await _enqueue(api, operator, {"input": mail(ORG_A, to="p@x.io")})
    tenant = await api.token("enqueue:*", tenant=ORG_A)
    status, body = await _enqueue(
        api, tenant, {"input": mail(ORG_A, to="c@x.io"), "parentId": parent["id"]}
    )
    assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN")
    _, doc = await api.call("GET", f"/v1/jobs/{parent['id']}", operator)
    assert doc["children"]["total"] == 0


async def test_a_missing_parent_is_404_and_another_tenants_input_is_403(api: Api) -> None:
    operator = await api.token("enqueue:*", "read")
    status, body = await _enqueue(
        api, operator, {"input": mail(ORG_A, to="c@x.io"), "parentId": "no-such-job"}
    )
    assert (status, body["error"]["code"]) == (404, "X_JOB_NOT_FOUND")
    _, parent = await _enqueue(api, operator, {"input": mail(ORG_A, to="p@x.io")})
    status, body = await _enqueue(
        api, operator, {"input": mail(ORG_B, to="c@x.io"), "parentId": parent["id"]}
    )
    assert (status, body["error"]["code"]) == (403, "X_JOB_TENANT_MISMATCH")


@pytest.mark.parametrize("bad", [7, "", "x" * 201])
async def test_a_bad_parent_id_is_400(api: Api, bad: Any) -> None:
    operator = await api.token("enqueue:*")
    status, body = await _enqueue(api, operator, {"input": mail(ORG_A), "parentId": bad})
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
