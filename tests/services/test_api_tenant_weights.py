"""``GET``/``PUT /v1/tenants/{tenant}/weight``: an operator reads and sets a tenant's weight in
the fair claim, effective at the next claim. Tenancy: a tenant token, whatever its scopes and
whichever tenant it names (its own or another's), is answered exactly as a path that does not
exist (404 ``X_NOT_FOUND``). Inputs are bounded: a tenant id past 200 bytes, a weight outside
1..1000, a body that is not ``{"weight": n}`` or one past its byte cap are 400
``X_INPUT_INVALID``."""

from __future__ import annotations

from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, make_api
from ujobs.services.api.tenants import MAX_BODY_BYTES


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def test_an_operator_reads_the_default_then_sets_a_weight_the_claim_reads(api: Api) -> None:
    op = await api.token("read", "operate")
    path = f"/v1/tenants/{ORG_A}/weight"
    assert await api.call("GET", path, op) == (200, {"tenantId": ORG_A, "weight": 1})
    assert await api.call("PUT", path, op, {"weight": 3}) == (200, {"tenantId": ORG_A, "weight": 3})
    assert await api.call("GET", path, op) == (200, {"tenantId": ORG_A, "weight": 3})
    stored = await api.pool.fetchval(
        "select weight from x_tenant_weights where tenant_id = $1", ORG_A
    )
    assert stored == 3
    # Another tenant is untouched.
    assert await api.call("GET", f"/v1/tenants/{ORG_B}/weight", op) == (
        200,
        {"tenantId": ORG_B, "weight": 1},
    )


async def test_a_tenant_token_gets_the_not_found_of_a_missing_path_for_any_tenant(
    api: Api,
) -> None:
    a = await api.token("admin", tenant=ORG_A)
    missing = await api.call("GET", "/v1/no-such-route", a)
    assert missing[0] == 404
    for tenant in (ORG_A, ORG_B):
        path = f"/v1/tenants/{tenant}/weight"
        for method, body in (("GET", None), ("PUT", {"weight": 9})):
            status, answer = await api.call(method, path, a, body)
            assert status == 404
            assert answer["error"]["code"] == missing[1]["error"]["code"] == "X_NOT_FOUND"
            assert answer["error"]["message"] == missing[1]["error"]["message"]
    assert await api.pool.fetchval("select count(*) from x_tenant_weights") == 0


async def test_an_operator_token_needs_the_scope(api: Api) -> None:
    reader = await api.token("read")
    status, answer = await api.call("PUT", f"/v1/tenants/{ORG_A}/weight", reader, {"weight": 2})
    assert (status, answer["error"]["code"]) == (403, "X_FORBIDDEN")
    status, _ = await api.call("GET", f"/v1/tenants/{ORG_A}/weight", None)
    assert status == 401


@pytest.mark.parametrize(
    "body",
    [{"weight": 0}, {"weight": 1001}, {"weight": "3"}, {"weight": True}, {"weight": 2.5}, {}, []],
)
async def test_a_bad_weight_is_400(api: Api, body: Any) -> None:
    op = await api.token("operate")
    status, answer = await api.call("PUT", f"/v1/tenants/{ORG_A}/weight", op, body)
    assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID")


async def test_a_long_tenant_or_a_big_body_is_400(api: Api) -> None:
    op = await api.token("read", "operate")
    status, answer = await api.call("GET", f"/v1/tenants/{'t' * 201}/weight", op)
    assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID")
    big = b'{"weight": 2' + b" " * MAX_BODY_BYTES + b"}"
    status, answer = await api.call("PUT", f"/v1/tenants/{ORG_A}/weight", op, data=big)
    assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID")
    status, answer = await api.call("PUT", f"/v1/tenants/{ORG_A}/weight", op, data=b"{")
    assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID")
