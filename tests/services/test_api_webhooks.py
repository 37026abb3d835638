"""The webhook endpoint routes: the same store functions as ``ujobs webhooks endpoints`` and
``ujobs webhooks deliveries``, the secret shown once (create, rotate) and never listed, scopes
like the other operator routes, and tenancy (another tenant's endpoint is 404 and untouched;
a tenant token adds endpoints of its own tenant only)."""

from __future__ import annotations

import asyncio
import base64
import os
from typing import Any

import asyncpg
import pytest
from prometheus_client import CollectorRegistry

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, make_api
from tests.support.cli import json_of, ujobs
from ujobs.errors import ConfigInvalidError
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.config.settings import ApiConfig
from ujobs.services.webhook_deliverer import webhook_settings
from ujobs.webhooks.ledger import DeliveryAttempt
from ujobs.webhooks.store_pg import PgWebhookStore

KEY = base64.b64encode(os.urandom(32)).decode()
BASE = "/v1/webhooks/endpoints"
URL = "https://partner.example/hook"


@pytest.fixture
async def api(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    monkeypatch: pytest.MonkeyPatch,
) -> Api:
    monkeypatch.setenv("UJOBS_SECRET_KEY", KEY)
    for name in (
        "UJOBS_SECRET_KEY_FILE",
        "UJOBS_WEBHOOK_ALLOW_PRIVATE",
        "UJOBS_WEBHOOK_ALLOW_HTTP",
    ):
        monkeypatch.delenv(name, raising=False)
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


def store_of(pool: asyncpg.Pool[Any]) -> PgWebhookStore:
    settings = webhook_settings({"UJOBS_SECRET_KEY": KEY})
    return PgWebhookStore(pool, settings.box, policy=settings.policy)


async def add(api: Api, token: str, **body: Any) -> dict[str, Any]:
    status, answer = await api.call("POST", BASE, token, {"url": URL, **body})
    assert status == 201, answer
    return dict(answer)


async def listed(api: Api, token: str, query: str = "") -> list[dict[str, Any]]:
    status, answer = await api.call("GET", BASE + query, token)
    assert status == 200, answer
    return list(answer["endpoints"])


async def test_add_answers_the_secret_once_and_the_list_never_shows_it(
    api: Api, pg_pool: Any, pg_dsn: str
) -> None:
    token = await api.token("read", "operate")
    made = await add(
        api,
        token,
        topics=["orders.paid"],
        headers={"x-partner-key": "hunter2"},
        description="billing",
        ratePerS=5,
        tenantId=ORG_A,
    )
    assert made["id"].startswith("ep_")
    assert made["secret"].startswith("whsec_")
    # The store opens the secret the api answered: it is the endpoint's own.
    endpoint, tenant = await store_of(pg_pool).endpoint(made["id"]) or (None, None)
    assert endpoint is not None
    assert (endpoint.secrets, tenant) == ((made["secret"],), ORG_A)
    status, body = await api.call("GET", BASE, token)
    assert status == 200
    [row] = body["endpoints"]
    assert row["id"] == made["id"]
    assert (row["url"], row["tenant"], row["topics"]) == (URL, ORG_A, ["orders.paid"])
    assert (row["headers"], row["ratePerS"], row["description"]) == (
        ["x-partner-key"],
        5.0,
        "billing",
    )
    text = str(body)
    assert made["secret"] not in text
    assert "hunter2" not in text
    # One implementation, two faces: the CLI lists the same document.
    env = {"UJOBS_SECRET_KEY": KEY}
    listing = await asyncio.to_thread(
        ujobs, "webhooks", "endpoints", "list", "--json", dsn=pg_dsn, env=env
    )  # the CLI runs its own event loop
    cli = json_of(listing)
    assert cli == body


async def test_a_tenant_token_sees_and_changes_only_its_own_tenants_endpoints(
    api: Api, pg_pool: Any
) -> None:
    operator = await api.token("read", "operate")
    theirs = await add(api, operator, tenantId=ORG_B)
    unowned = await add(api, operator)
    token = await api.token("read", "operate", tenant=ORG_A)
    mine = await add(api, token)  # no tenantId: the token's tenant
    assert [e["id"] for e in await listed(api, token)] == [mine["id"]]
    assert [e["id"] for e in await listed(api, token, f"?tenantId={ORG_B}")] == [mine["id"]]
    assert {e["id"] for e in await listed(api, operator)} == {
        mine["id"],
        theirs["id"],
        unowned["id"],
    }
    assert [e["id"] for e in await listed(api, operator, f"?tenantId={ORG_B}")] == [theirs["id"]]
    status, body = await api.call("POST", BASE, token, {"url": URL, "tenantId": ORG_B})
    assert (status, body["error"]["code"]) == (403, "X_TENANCY_ACTOR_MISMATCH")
    for other in (theirs["id"], unowned["id"], "ep_nope"):
        for method, path in (
            ("POST", f"{BASE}/{other}/disable"),
            ("POST", f"{BASE}/{other}/enable"),
            ("POST", f"{BASE}/{other}/rotate-secret"),
            ("GET", f"{BASE}/{other}/deliveries"),
        ):
            status, body = await api.call(method, path, token)
            assert (status, body["error"]["code"]) == (404, "X_WEBHOOK_ENDPOINT_UNKNOWN"), path
            assert body["error"]["meta"] == {"endpoint_id": other}
    # Untouched: not disabled, the secret the operator got still the only one.
    found = await store_of(pg_pool).endpoint(theirs["id"])
    assert found is not None
    assert found[0].disabled is False
    assert found[0].secrets == (theirs["secret"],)


async def test_payload_is_chosen_at_registration_and_listed_within_the_tenant(
    api: Api,
) -> None:
    """New endpoints get the Standard Webhooks envelope unless they ask for the raw bytes;
    the field is the endpoint's, so a tenant lists its own endpoints' payloads only."""
    mine_token = await api.token("read", "operate", tenant=ORG_A)
    theirs_token = await api.token("read", "operate", tenant=ORG_B)
    enveloped = await add(api, mine_token)
    raw = await add(api, mine_token, payload="raw")
    spec = await add(api, mine_token, scheme="ultimate")
    theirs = await add(api, theirs_token, payload="envelope")
    mine = {e["id"]: e["payload"] for e in await listed(api, mine_token)}
    assert mine == {enveloped["id"]: "envelope", raw["id"]: "raw", spec["id"]: "raw"}
    assert {e["id"]: e["payload"] for e in await listed(api, theirs_token)} == {
        theirs["id"]: "envelope"
    }


async def test_disable_and_enable_move_the_endpoint(api: Api, pg_pool: Any) -> None:
    token = await api.token("read", "operate", tenant=ORG_A)
    made = await add(api, token)
    status, body = await api.call("POST", f"{BASE}/{made['id']}/disable", token)
    assert (status, body) == (200, {"id": made["id"], "disabled": True})
    [row] = await listed(api, token)
    assert row["disabledAtMs"] is not None
    assert row["disabledReason"] == "operator"
    assert await store_of(pg_pool).ledger.is_disabled(made["id"]) is True
    status, body = await api.call("POST", f"{BASE}/{made['id']}/enable", token)
    assert (status, body) == (200, {"id": made["id"], "disabled": False})
    [row] = await listed(api, token)
    assert row["disabledAtMs"] is None
    assert await store_of(pg_pool).ledger.is_disabled(made["id"]) is False


async def test_rotate_secret_answers_the_new_secret_once(api: Api, pg_pool: Any) -> None:
    token = await api.token("read", "operate")
    made = await add(api, token)
    status, body = await api.call("POST", f"{BASE}/{made['id']}/rotate-secret", token)
    assert status == 200
    assert body["id"] == made["id"]
    assert body["secret"].startswith("whsec_")
    assert body["secret"] != made["secret"]
    [row] = await listed(api, token)
    assert row["rotating"] is True
    found = await store_of(pg_pool).endpoint(made["id"])
    assert found is not None
    assert found[0].secrets == (body["secret"], made["secret"])  # both sign in the grace
    status, again = await api.call(
        "POST", f"{BASE}/{made['id']}/rotate-secret", token, {"graceHours": 0}
    )
    assert status == 200
    found = await store_of(pg_pool).endpoint(made["id"])
    assert found is not None
    assert found[0].secrets == (again["secret"],)  # no grace: the old one is gone
    assert body["secret"] not in str(await listed(api, token))
    for grace in (-1, 721, "24", True):
        status, error = await api.call(
            "POST", f"{BASE}/{made['id']}/rotate-secret", token, {"graceHours": grace}
        )
        assert (status, error["error"]["code"]) == (400, "X_INPUT_INVALID"), grace


async def test_deliveries_lists_the_ledger_newest_first(api: Api, pg_pool: Any) -> None:
    token = await api.token("read", "operate", tenant=ORG_A)
    made = await add(api, token)
    ledger = store_of(pg_pool).ledger
    for attempt, outcome in ((1, "failed"), (2, "delivered")):
        await ledger.record(
            DeliveryAttempt(
                endpoint_id=made["id"],
                event_id="evt_1",
                job_id="job_1",
                attempt=attempt,
                outcome=outcome,  # type: ignore[arg-type]
                status=500 if outcome == "failed" else 200,
                code="X_WEBHOOK_DELIVERY_FAILED" if outcome == "failed" else None,
                latency_ms=7,
                response_excerpt="boom" if outcome == "failed" else "ok",
                at_ms=1_700_000_000_000 + attempt,
            )
        )
    reader = await api.token("read", tenant=ORG_A)
    status, body = await api.call("GET", f"{BASE}/{made['id']}/deliveries", reader)
    assert status == 200
    assert [(d["attempt"], d["outcome"]) for d in body["deliveries"]] == [
        (2, "delivered"),
        (1, "failed"),
    ]
    assert body["deliveries"][1] == {
        "endpointId": made["id"],
        "eventId": "evt_1",
        "jobId": "job_1",
        "attempt": 1,
        "outcome": "failed",
        "status": 500,
        "code": "X_WEBHOOK_DELIVERY_FAILED",
        "latencyMs": 7,
        "response": "boom",
        "atMs": 1_700_000_000_001,
    }
    status, body = await api.call("GET", f"{BASE}/{made['id']}/deliveries?failed=true", reader)
    assert [d["attempt"] for d in body["deliveries"]] == [1]
    status, body = await api.call("GET", f"{BASE}/{made['id']}/deliveries?limit=1", reader)
    assert [d["attempt"] for d in body["deliveries"]] == [2]
    for query in ("?limit=0", "?limit=1001", "?limit=x", "?failed=yes", "?after=1"):
        status, body = await api.call("GET", f"{BASE}/{made['id']}/deliveries{query}", reader)
        assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID"), query


async def test_scopes_and_credentials(api: Api) -> None:
    operator = await api.token("read", "operate")
    made = await add(api, operator)
    reader = await api.token("read")
    for method, path in (
        ("POST", BASE),
        ("POST", f"{BASE}/{made['id']}/disable"),
        ("POST", f"{BASE}/{made['id']}/enable"),
        ("POST", f"{BASE}/{made['id']}/rotate-secret"),
    ):
        status, body = await api.call(method, path, reader, {"url": URL} if path == BASE else None)
        assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN"), path
        status, body = await api.call(method, path, None)
        assert (status, body["error"]["code"]) == (401, "X_UNAUTHORIZED"), path
    enqueuer = await api.token("enqueue:*")
    for path in (BASE, f"{BASE}/{made['id']}/deliveries"):
        status, body = await api.call("GET", path, enqueuer)
        assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN"), path


@pytest.mark.parametrize(
    ("body", "code"),
    [
        ({}, "X_INPUT_INVALID"),  # no url
        ({"url": 7}, "X_INPUT_INVALID"),
        ({"url": URL, "colour": "red"}, "X_INPUT_INVALID"),
        ({"url": URL, "topics": "orders.paid"}, "X_INPUT_INVALID"),
        ({"url": URL, "headers": {"x-a": 1}}, "X_INPUT_INVALID"),
        ({"url": URL, "ratePerS": "fast"}, "X_INPUT_INVALID"),
        ({"url": "http://partner.example/hook"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": "https://127.0.0.1/hook"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": "https://0x7f.1/hook"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": "https://2130706433/hook"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": "https://localhost./hook"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "headers": {"X Api Key": "v"}}, "X_WEBHOOK_ENDPOINT_INVALID"),
        (
            {"url": URL, "headers": {"X-Api-Key": "sekrit-9\r\nX-Injected: 1"}},
            "X_WEBHOOK_ENDPOINT_INVALID",
        ),
        ({"url": URL, "headers": {"X-Api-Key": "sekrit-9\u0000"}}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "scheme": "rot13"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "payload": "json"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "payload": 1}, "X_INPUT_INVALID"),
        ({"url": URL, "scheme": "ultimate", "payload": "envelope"}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "ratePerS": 0}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "topics": []}, "X_WEBHOOK_ENDPOINT_INVALID"),
        ({"url": URL, "topics": ["a:b"]}, "X_WEBHOOK_EVENT_INVALID"),
    ],
)
async def test_add_refuses_a_bad_endpoint_with_400(
    api: Api, body: dict[str, Any], code: str
) -> None:
    token = await api.token("operate")
    status, answer = await api.call("POST", BASE, token, {**body, "description": "sekrit-9"})
    assert (status, answer["error"]["code"]) == (400, code)
    assert "sekrit-9" not in str(answer)


async def test_a_taken_id_is_400_and_a_body_over_the_limit_413(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("UJOBS_SECRET_KEY", KEY)
    monkeypatch.delenv("UJOBS_SECRET_KEY_FILE", raising=False)
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, UJOBS_API_MAX_BODY_BYTES="2048")
    token = await api.token("operate")
    await add(api, token, id="ep_taken")
    status, body = await api.call("POST", BASE, token, {"url": URL, "id": "ep_taken"})
    assert (status, body["error"]["code"]) == (400, "X_WEBHOOK_ENDPOINT_INVALID")
    status, body = await api.call("POST", BASE, token, {"url": URL, "description": "x" * 4096})
    assert (status, body["error"]["code"]) == (413, "X_BODY_TOO_LARGE")


async def test_a_tenant_token_cannot_learn_that_an_id_exists_in_another_tenant(
    api: Api,
) -> None:
    """Endpoint ids are one namespace across tenants, so a tenant token never chooses one: an
    id another tenant holds and a free one get the same answer, and nothing is added."""
    operator = await api.token("operate")
    await add(api, operator, id="ep_org_b", tenantId=ORG_B)
    token = await api.token("operate", "read", tenant=ORG_A)
    answers = []
    for taken_or_free in ("ep_org_b", "ep_free"):
        status, body = await api.call("POST", BASE, token, {"url": URL, "id": taken_or_free})
        error = body["error"]
        answers.append((status, error["code"], error["message"].replace(taken_or_free, "ID")))
        assert taken_or_free not in str(error["meta"])
    assert answers[0] == answers[1]
    assert answers[0][:2] == (400, "X_WEBHOOK_ENDPOINT_INVALID")
    assert await listed(api, token) == []
    own = await add(api, token)  # without an id: the answer's id is the endpoint's
    assert own["id"].startswith("ep_")
    assert [e["id"] for e in await listed(api, token)] == [own["id"]]


async def test_an_api_without_a_sealing_key_answers_503_naming_the_variable(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No key: the api runs, these routes say why not."""
    monkeypatch.delenv("UJOBS_SECRET_KEY_FILE", raising=False)
    monkeypatch.delenv("UJOBS_SECRET_KEY", raising=False)
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    assert (await api.client.get("/healthz")).status == 200
    token = await api.token("read", "operate")
    for method, path in (("GET", BASE), ("POST", BASE), ("GET", f"{BASE}/ep_1/deliveries")):
        status, body = await api.call(
            method, path, token, {"url": URL} if method == "POST" else None
        )
        assert (status, body["error"]["code"]) == (503, "X_DRIVER_UNAVAILABLE"), path
        assert body["error"]["meta"] == {"variable": "UJOBS_SECRET_KEY"}
        assert "has no key" in body["error"]["message"]


@pytest.mark.parametrize(
    "key", ["an-export-signing-key-of-48-characters-not-base64", "c2hvcnQ=", "k1:c2hvcnQ="]
)
def test_an_api_given_a_key_that_cannot_seal_refuses_to_start(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch, key: str
) -> None:
    """One ``UJOBS_SECRET_KEY`` seals webhook secrets and signs export links, read one way by
    every service: a value that is not a key stops the api at start, naming the variable and
    never the value (it used to start and answer these routes 503)."""
    monkeypatch.delenv("UJOBS_SECRET_KEY_FILE", raising=False)
    monkeypatch.setenv("UJOBS_SECRET_KEY", key)
    config = ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": "tests.unit.sample_app:api"})
    with pytest.raises(ConfigInvalidError) as caught:
        create_app(config, metrics=JobMetrics(CollectorRegistry()))
    assert caught.value.meta["variable"] == "UJOBS_SECRET_KEY"
    assert key not in caught.value.message
