"""The host of an export part's link is ``UJOBS_PUBLIC_URL``, never the request's ``Host``
header: without it ``ujobs api`` makes no link and says why; ``ujobs dev`` links to the
request's own host."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from tests.exports.export_app.jobs import expected_csv, orders_export
from tests.exports.kit import attempt, enqueue
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.errors import ConfigInvalidError
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.api.tokens import TokenStore
from ujobs.services.config.settings import ApiConfig

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]
KEY = base64.b64encode(bytes(range(32))).decode()
ORDER = {"org_id": "org-1", "export_id": "e1", "rows": 25, "slow_ms": 0}
HOSTILE = {"Host": "evil.example", "X-Forwarded-Host": "evil.example"}


@pytest.fixture
async def driver(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[PostgresDriver]:
    found = postgres_driver(pg_pool)
    try:
        yield found
    finally:
        await found.close()


@pytest.fixture(autouse=True)
def _store(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("UJOBS_EXPORT_URL", str(tmp_path))
    monkeypatch.setenv("UJOBS_SECRET_KEY", KEY)
    monkeypatch.delenv("UJOBS_SECRET_KEY_FILE", raising=False)


async def api(
    aiohttp_client: MakeClient, pg_dsn: str, *, service: str = "api", **env: str
) -> Client:
    config = ApiConfig.load(
        {"DATABASE_URL": pg_dsn, "UJOBS_APP": "tests.exports.export_app:api", **env},
        service=service,
    )
    app = create_app(config, metrics=JobMetrics(CollectorRegistry()))
    pool = await asyncpg.create_pool(pg_dsn, min_size=0, max_size=1)
    try:
        reader = await TokenStore(pool).create(tenant=None, scopes=("read",))
    finally:
        await pool.close()
    return await aiohttp_client(app, headers={"Authorization": f"Bearer {reader.secret}"})


async def exported(driver: PostgresDriver) -> str:
    job_id = await enqueue(driver, orders_export, ORDER)
    done = await attempt(driver, orders_export)
    assert done.outcome == "completed", done.error
    return job_id


async def test_links_name_the_public_url_whatever_host_the_request_claims(
    aiohttp_client: MakeClient, pg_dsn: str, driver: PostgresDriver
) -> None:
    public = "https://jobs.example.test/queue"
    client = await api(aiohttp_client, pg_dsn, UJOBS_PUBLIC_URL=public + "/")
    job_id = await exported(driver)
    answer = await client.get(f"/v1/exports/{job_id}", headers=HOSTILE)
    assert answer.status == 200
    body = await answer.json()
    assert "evil.example" not in str(body)
    whole = b""
    for part in body["parts"]:
        assert part["url"].startswith(f"{public}/v1/exports/{job_id}/parts/")
        # Behind a proxy that strips /queue, the api sees the path the link was signed over.
        got = await client.get(part["url"].removeprefix(public))
        assert got.status == 200
        whole += await got.read()
    assert whole == expected_csv(25)


async def test_without_a_public_url_the_api_makes_no_link_and_says_why(
    aiohttp_client: MakeClient, pg_dsn: str, driver: PostgresDriver
) -> None:
    client = await api(aiohttp_client, pg_dsn)
    job_id = await exported(driver)
    answer = await client.get(f"/v1/exports/{job_id}", headers=HOSTILE)
    assert answer.status == 200
    body = await answer.json()
    assert "evil.example" not in str(body)
    assert body["ready"] is True
    assert len(body["parts"]) == 3
    for part in body["parts"]:
        assert part["url"] is None
        assert part["error"]["code"] == "X_CONFIG_INVALID"
        assert part["error"]["meta"] == {"variable": "UJOBS_PUBLIC_URL"}


async def test_ujobs_dev_links_to_the_host_the_request_came_to(
    aiohttp_client: MakeClient, pg_dsn: str, driver: PostgresDriver
) -> None:
    client = await api(aiohttp_client, pg_dsn, service="dev")
    job_id = await exported(driver)
    body = await (await client.get(f"/v1/exports/{job_id}")).json()
    origin = str(client.make_url("")).rstrip("/")
    for part in body["parts"]:
        assert part["url"].startswith(f"{origin}/v1/exports/{job_id}/parts/")
        assert "error" not in part


@pytest.mark.parametrize(
    "raw",
    [
        "jobs.example.com",
        "ftp://jobs.example.com",
        "https://user:pw@jobs.example.com",
        "https://jobs.example.com/?next=1",
        "https://jobs.example.com/#top",
        "https:///queue",
    ],
)
def test_a_public_url_that_is_not_a_base_url_stops_the_api_at_start(raw: str) -> None:
    with pytest.raises(ConfigInvalidError) as refused:
        ApiConfig.load({"DATABASE_URL": "postgresql://x/y", "UJOBS_PUBLIC_URL": raw})
    assert refused.value.meta["variable"] == "UJOBS_PUBLIC_URL"
    assert "pw" not in refused.value.message


def test_a_public_url_keeps_its_host_port_and_prefix() -> None:
    config = ApiConfig.load(
        {"DATABASE_URL": "postgresql://x/y", "UJOBS_PUBLIC_URL": "HTTPS://Jobs.example.com:8443/q/"}
    )
    assert config.public_url == "https://Jobs.example.com:8443/q"
    assert config.common.service == "api"
