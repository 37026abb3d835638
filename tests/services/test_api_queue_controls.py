"""``"debounce"`` on ``POST /v1/jobs/{name}`` and ``/batch``: a run with the key that has not
started is moved to now + debounce with the newer input (``debounced: true``), within the
caller's tenant only; the field is checked (400 naming it); many concurrent requests of one
key make one run (the api's group commit included); a revoked token moves nothing; a batch
under ``onConflict: error`` cannot honour it (400 ``X_ENQUEUE_OPTION_UNSUPPORTED``)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import orjson
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, make_api
from ujobs.clock import FrozenClock

DEBOUNCE_MS = 5_000


def notify(user: str, *items: str) -> dict[str, Any]:
    """The sample app's ``notify`` (tenant "none", key ``notify:<user>``): a tenant token's
    row carries that token's tenant, so one user is one key per tenant."""
    return {"user_id": user, "items": [{"id": i} for i in items]}


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def api(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock)


async def rows(api: Api) -> list[asyncpg.Record]:
    return list(
        await api.pool.fetch(
            "select id, tenant_id, state, input, (extract(epoch from run_at) * 1000)::bigint"
            " as run_at_ms from x_jobs order by created_at, id"
        )
    )


async def test_debounce_moves_the_waiting_run_and_takes_the_new_input_in_its_tenant_only(
    api: Api, clock: FrozenClock
) -> None:
    a = await api.token("enqueue:notify", tenant=ORG_A)
    b = await api.token("enqueue:notify", tenant=ORG_B)
    path = "/v1/jobs/notify"
    status, first = await api.call("POST", path, a, {"input": notify(ORG_A), "debounce": "5s"})
    assert status == 202
    assert (first["deduped"], first["debounced"]) == (False, False)
    clock.advance(2_000)
    moved = await api.call("POST", path, a, {"input": notify(ORG_A, "x"), "debounce": 5_000})
    assert moved == (202, {**first, "deduped": True, "debounced": True})
    # Tenant B's same key is its own run: it neither moves A's nor is moved by it.
    status, other = await api.call("POST", path, b, {"input": notify(ORG_A), "debounce": "5s"})
    assert (status, other["deduped"], other["debounced"]) == (202, False, False)
    [row_a, row_b] = await rows(api)
    assert (row_a["id"], row_a["tenant_id"], row_a["state"]) == (first["id"], ORG_A, "delayed")
    assert orjson.loads(row_a["input"]) == notify(ORG_A, "x")
    assert row_a["run_at_ms"] == clock.now_ms() + DEBOUNCE_MS
    assert (row_b["id"], row_b["tenant_id"]) == (other["id"], ORG_B)
    # Without "debounce" the waiting run only dedupes, as ever.
    plain = await api.call("POST", path, a, {"input": notify(ORG_A, "y")})
    assert plain == (202, {**first, "deduped": True, "debounced": False})
    assert orjson.loads((await rows(api))[0]["input"]) == notify(ORG_A, "x")


@pytest.mark.parametrize(
    ("value", "problem"),
    [(0, "zero"), ("soon", "duration"), ("400d", "too long"), (True, "a duration")],
)
async def test_a_bad_debounce_is_400_naming_the_field(api: Api, value: Any, problem: str) -> None:
    token = await api.token("enqueue:notify")
    for path, body in (
        ("/v1/jobs/notify", {"input": notify(ORG_A)}),
        ("/v1/jobs/notify/batch", {"inputs": [notify(ORG_A)]}),
    ):
        status, answer = await api.call("POST", path, token, {**body, "debounce": value})
        assert (status, answer["error"]["code"]) == (400, "X_INPUT_INVALID")
        [issue] = answer["error"]["meta"]["issues"]
        assert issue["path"] == "debounce"
        assert problem in issue["message"]
    assert await api.jobs() == []


async def test_concurrent_debounced_requests_of_one_key_make_one_run(api: Api) -> None:
    token = await api.token("enqueue:notify", tenant=ORG_A)
    answers = await asyncio.gather(
        *(
            api.call(
                "POST", "/v1/jobs/notify", token, {"input": notify(ORG_A, str(n)), "debounce": "5s"}
            )
            for n in range(30)
        )
    )
    assert {status for status, _ in answers} == {202}
    assert len({body["id"] for _, body in answers}) == 1
    assert sum(not body["deduped"] for _, body in answers) == 1
    assert len(await api.jobs()) == 1


async def test_a_revoked_token_moves_nothing(api: Api, clock: FrozenClock) -> None:
    issued = await api.issue("enqueue:notify", tenant=ORG_A)
    body = {"input": notify(ORG_A), "debounce": "5s"}
    first = await api.call("POST", "/v1/jobs/notify", issued.secret, body)
    assert first[0] == 202
    await api.tokens.revoke(issued.record.id)
    clock.advance(1_000)
    moved = {"input": notify(ORG_A, "late"), "debounce": "5s"}
    status, answer = await api.call("POST", "/v1/jobs/notify", issued.secret, moved)
    assert (status, answer["error"]["code"]) == (401, "X_UNAUTHORIZED")
    [row] = await rows(api)
    assert orjson.loads(row["input"]) == notify(ORG_A)
    assert row["run_at_ms"] == clock.now_ms() - 1_000 + DEBOUNCE_MS


async def test_a_batch_debounces_its_repeats_and_refuses_it_under_on_conflict_error(
    api: Api,
) -> None:
    token = await api.token("enqueue:notify", tenant=ORG_A)
    path = "/v1/jobs/notify/batch"
    inputs = [notify(ORG_A), notify(ORG_A, "x"), notify(ORG_B)]
    status, body = await api.call("POST", path, token, {"inputs": inputs, "debounce": "5s"})
    assert status == 202
    assert [(j["deduped"], j["debounced"]) for j in body["jobs"]] == [
        (False, False),
        (True, True),
        (False, False),
    ]
    assert body["jobs"][0]["id"] == body["jobs"][1]["id"]
    assert orjson.loads((await rows(api))[0]["input"]) == notify(ORG_A, "x")
    strict = {"inputs": [notify(ORG_A, "z")], "debounce": "5s", "onConflict": "error"}
    status, body = await api.call("POST", path, token, strict)
    assert (status, body["error"]["code"]) == (400, "X_ENQUEUE_OPTION_UNSUPPORTED")
    assert len(await api.jobs()) == 2
