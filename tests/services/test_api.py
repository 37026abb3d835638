"""The api's routes through aiohttp's test client, against a real Postgres."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from tests.support.cli import enqueue, run_to
from ujobs.drivers.postgres.driver import postgres_driver
from ujobs.errors import ConfigInvalidError
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import REGISTRY, STATE, create_app, status_for
from ujobs.services.api.openapi import enqueue_paths_of
from ujobs.services.config.settings import ApiConfig

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]


def config(dsn: str, **env: str) -> ApiConfig:
    return ApiConfig.load({"DATABASE_URL": dsn, **env})


@pytest.fixture
async def client(aiohttp_client: MakeClient, pg_dsn: str) -> Client:
    app = create_app(
        config(pg_dsn, UJOBS_APP="tests.unit.sample_app:api"),
        metrics=JobMetrics(CollectorRegistry()),
    )
    return await aiohttp_client(app)


async def test_healthz(client: Client) -> None:
    response = await client.get("/healthz")
    assert response.status == 200
    assert await response.json() == {"status": "ok", "service": "api"}


async def test_readyz_is_503_while_draining(client: Client) -> None:
    response = await client.get("/readyz")
    assert response.status == 200
    assert await response.json() == {"status": "ready"}
    assert client.app is not None
    client.app[STATE].draining = True
    response = await client.get("/readyz")
    assert response.status == 503
    body = await response.json()
    assert body["error"]["code"] == "X_DRAINING"
    assert set(body["error"]) == {"code", "message", "meta"}
    assert response.headers.get("Retry-After") == "1"  # transient: another replica answers
    # Liveness is untouched by a drain: the process is still fine.
    assert (await client.get("/healthz")).status == 200


def gauge(text: str, series: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.split()[-1])
    return None


async def seed(pool: asyncpg.Pool[Any], *keys: str, queue: str = "mail") -> None:
    driver = postgres_driver(pool)
    for key in keys:
        await enqueue(driver, "send", key, queue=queue)


async def test_metrics_reads_the_queue_gauges_at_most_every_refresh(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    driver = postgres_driver(pg_pool)
    dead = await enqueue(driver, "charge", "k-dead")
    await run_to(driver, dead, dead="X_DECLINED")
    await seed(pg_pool, "a", "b")
    app = create_app(
        config(pg_dsn, UJOBS_METRICS_REFRESH_MS="3600000"),
        metrics=JobMetrics(CollectorRegistry()),
    )
    client = await aiohttp_client(app)
    response = await client.get("/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"].startswith("text/plain")
    text = await response.text()
    assert gauge(text, 'queue_depth{queue="mail"}') == 2.0
    assert gauge(text, 'queue_dead_jobs{queue="default"}') == 1.0
    assert gauge(text, 'queue_oldest_ready_seconds{queue="mail"}') is not None
    await seed(pg_pool, "c")
    # Inside the refresh interval a scrape serves the values it read, not a fresh table scan.
    again = await (await client.get("/metrics")).text()
    assert gauge(again, 'queue_depth{queue="mail"}') == 2.0


async def test_metrics_refresh_when_the_interval_allows(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    app = create_app(
        config(pg_dsn, UJOBS_METRICS_REFRESH_MS="0"), metrics=JobMetrics(CollectorRegistry())
    )
    client = await aiohttp_client(app)
    await seed(pg_pool, "a")
    assert gauge(await (await client.get("/metrics")).text(), 'queue_depth{queue="mail"}') == 1
    await seed(pg_pool, "b")
    assert gauge(await (await client.get("/metrics")).text(), 'queue_depth{queue="mail"}') == 2


async def test_manifest_is_the_apps(client: Client) -> None:
    response = await client.get("/v1/manifest")
    assert response.status == 200
    body = await response.json()
    assert [j["name"] for j in body["jobs"]] == [
        "billing.charge",
        "invoice",
        "notify",
        "refund",
        "send_mail",
    ]
    assert [t["name"] for t in body["tasks"]] == ["nightly_digest"]


async def test_openapi_documents_exactly_the_routes_served(client: Client) -> None:
    response = await client.get("/v1/openapi.json")
    doc = await response.json()
    assert doc["openapi"] == "3.1.0"
    assert client.app is not None
    served = {
        (route.method.lower(), route.resource.canonical)
        for route in client.app.router.routes()
        if route.method != "HEAD"
        and route.resource is not None
        # The dashboard's HTML pages (/_x) are for people, not API clients.
        and not route.resource.canonical.startswith("/_x")
    }
    per_job = enqueue_paths_of(client.app[REGISTRY])
    documented = set()
    for path, item in doc["paths"].items():
        for method in set(item) - {"parameters"}:
            # A job's own enqueue paths are the generic route with its name filled in.
            generic = (
                re.sub(r"^/v1/jobs/[^/]+", "/v1/jobs/{job}", path)
                if path.removesuffix("/batch") in per_job
                else path
            )
            documented.add((method, generic))
    assert served == documented
    assert set(per_job.values()) == set(client.app[REGISTRY].jobs)
    assert doc["components"]["schemas"]["Input_send_mail"]["required"] == [
        "to",
        "subject",
        "org_id",
    ]
    task_param = doc["paths"]["/v1/tasks/{task}/pause"]["parameters"][0]
    assert task_param["schema"]["enum"] == ["nightly_digest"]
    body = doc["paths"]["/v1/jobs/send_mail"]["post"]["requestBody"]["content"]["application/json"]
    assert body["schema"] == {"$ref": "#/components/schemas/EnqueueSendMailBody"}
    parts = doc["components"]["schemas"]["EnqueueSendMailBody"]["allOf"]
    assert parts == [
        {"$ref": "#/components/schemas/EnqueueOptions"},
        {"$ref": "#/components/schemas/EnqueueSendMailBodyFields"},
    ]
    fields = doc["components"]["schemas"]["EnqueueSendMailBodyFields"]
    assert fields["properties"]["input"] == {"$ref": "#/components/schemas/Input_send_mail"}


async def test_errors_are_json_with_a_code(client: Client) -> None:
    missing = await client.get("/v1/nope")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "X_NOT_FOUND"
    wrong = await client.post("/healthz")
    assert wrong.status == 405
    assert (await wrong.json())["error"]["code"] == "X_METHOD_NOT_ALLOWED"


def test_status_for_codes() -> None:
    assert status_for("X_INPUT_INVALID") == 400
    assert status_for("X_JOB_NOT_FOUND") == 404
    assert status_for("X_JOB_DUPLICATE") == 409
    assert status_for("X_RATE_LIMITED") == 429
    assert status_for("X_DRAINING") == 503
    assert status_for("X_SOMETHING_NEW") == 500


def test_a_bad_app_fails_at_create(pg_dsn: str) -> None:
    with pytest.raises(ConfigInvalidError, match="cannot import 'no_such_module'"):
        create_app(config(pg_dsn, UJOBS_APP="no_such_module:api"))
