"""``GET /v1/exports/{id}`` and the signed part links, through aiohttp's test client."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient
from prometheus_client import CollectorRegistry

from tests.exports.conftest import LocalS3
from tests.exports.export_app.failing import broken_export
from tests.exports.export_app.jobs import expected_csv, orders_export, plain_job
from tests.exports.kit import attempt, enqueue
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.execution.settle import error_summary
from ujobs.metrics import JobMetrics
from ujobs.services.api.app import create_app
from ujobs.services.api.exports import (
    AUTHORIZE,
    ExportLinkInvalidError,
    Reader,
    part_path,
    sign_path,
    verify_path,
)
from ujobs.services.api.tokens import TokenStore
from ujobs.services.config.settings import ApiConfig

Client = TestClient[web.Request, web.Application]
MakeClient = Callable[..., Awaitable[Client]]
KEY_BYTES = bytes(range(32))
KEY = base64.b64encode(KEY_BYTES).decode()
ORDER = {"org_id": "org-1", "export_id": "e1", "rows": 25, "slow_ms": 0}
APP = "tests.exports.export_app:api"
PUBLIC_URL = "https://jobs.example.test"


@pytest.fixture
async def driver(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[PostgresDriver]:
    found = postgres_driver(pg_pool)
    try:
        yield found
    finally:
        await found.close()


async def api(
    aiohttp_client: MakeClient, pg_dsn: str, monkeypatch: pytest.MonkeyPatch, **env: str
) -> Client:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": APP, "UJOBS_PUBLIC_URL": PUBLIC_URL}),
        metrics=JobMetrics(CollectorRegistry()),
    )
    pool = await asyncpg.create_pool(pg_dsn, min_size=0, max_size=1)
    try:
        reader = await TokenStore(pool).create(tenant=None, scopes=("read",))
    finally:
        await pool.close()
    return await aiohttp_client(app, headers={"Authorization": f"Bearer {reader.secret}"})


async def exported(driver: PostgresDriver, input: dict[str, Any] = ORDER) -> str:
    job_id = await enqueue(driver, orders_export, input)
    done = await attempt(driver, orders_export)
    assert done.outcome == "completed", done.error
    return job_id


async def test_an_export_answers_its_manifest_and_signed_links_that_download_it(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    client = await api(
        aiohttp_client, pg_dsn, monkeypatch, UJOBS_EXPORT_URL=str(tmp_path), UJOBS_SECRET_KEY=KEY
    )
    job_id = await exported(driver)
    answer = await client.get(f"/v1/exports/{job_id}")
    assert answer.status == 200
    body = await answer.json()
    assert body["ready"] is True
    assert body["tenant"] == "org-1"
    assert body["lastError"] is None
    assert body["manifest"]["parts"] == 3
    assert body["manifest"]["rows"] == 25
    assert [p["key"] for p in body["parts"]] == [
        f"exports/org-1/e1/part-0000{i}.csv" for i in range(3)
    ]
    whole = b""
    for part in body["parts"]:
        url = part["url"]
        assert "sig=" in url
        got = await client.get(url.removeprefix(PUBLIC_URL))
        assert got.status == 200
        assert got.headers["Content-Type"].startswith("text/csv")
        whole += await got.read()
    assert whole == expected_csv(25)


async def test_a_forged_or_expired_link_is_refused(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    client = await api(
        aiohttp_client, pg_dsn, monkeypatch, UJOBS_EXPORT_URL=str(tmp_path), UJOBS_SECRET_KEY=KEY
    )
    job_id = await exported(driver)
    path = part_path(job_id, 0)
    future = 4_102_444_800  # 2100
    good = sign_path(KEY_BYTES, path, future)
    assert (await client.get(f"{path}?expires={future}&sig={good}")).status == 200
    for query in (
        f"expires={future + 1}&sig={good}",  # the expiry moved
        f"expires={future}&sig={'0' * 64}",  # forged
        f"expires={future}&sig={sign_path(b'x' * 40, path, future)}",  # another key
        "expires=1&sig=" + sign_path(KEY_BYTES, path, 1),  # expired in 1970
        "",
    ):
        got = await client.get(f"{path}?{query}")
        assert got.status == 403, query
        assert (await got.json())["error"]["code"] == "X_EXPORT_LINK_INVALID"
    other = part_path(job_id, 1)
    assert (await client.get(f"{other}?expires={future}&sig={good}")).status == 403


def test_verify_path_answers_the_expiry_of_a_valid_link() -> None:
    sig = sign_path(b"key", "/p", 100)
    assert verify_path([b"key"], "/p", "100", sig, now_s=100) == 100


def test_a_link_signed_before_a_key_rotation_opens_until_it_expires() -> None:
    """``UJOBS_SECRET_KEY=new:…,old:…``: new links are signed with the first key, and a link
    handed out under the old one still opens; a key not in the list never does."""
    old = sign_path(b"old", "/p", 100)
    assert verify_path([b"new", b"old"], "/p", "100", old, now_s=50) == 100
    with pytest.raises(ExportLinkInvalidError):
        verify_path([b"new"], "/p", "100", old, now_s=50)


@pytest.mark.parametrize(("expires", "sig"), [("100", "%F3\u00a4\u00d4"), ("\u00b2", "ab")])
def test_verify_path_refuses_non_ascii_signatures_and_digits(expires: str, sig: str) -> None:
    """A fuzzer's link: a non-ASCII sig (compare_digest raises TypeError on such a str) or a
    superscript digit (isdigit, yet int() refuses it) is an invalid link, never a 500."""
    with pytest.raises(ExportLinkInvalidError):
        verify_path([b"key"], "/p", expires, sig, now_s=0)


async def test_unknown_ids_non_exports_and_unfinished_exports(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    client = await api(
        aiohttp_client, pg_dsn, monkeypatch, UJOBS_EXPORT_URL=str(tmp_path), UJOBS_SECRET_KEY=KEY
    )
    missing = await client.get("/v1/exports/01a2437c-0000-7000-8000-000000000000")
    assert missing.status == 404
    assert (await missing.json())["error"]["code"] == "X_EXPORT_NOT_FOUND"
    plain = await enqueue(driver, plain_job, {})
    assert (await client.get(f"/v1/exports/{plain}")).status == 404
    waiting = await enqueue(driver, orders_export, {**ORDER, "export_id": "e2"})
    body = await (await client.get(f"/v1/exports/{waiting}")).json()
    assert body["state"] == "ready"
    assert body["ready"] is False
    assert body["manifest"] is None
    assert body["parts"] == []
    path = part_path(waiting, 0)
    sig = sign_path(KEY_BYTES, path, 4_102_444_800)
    assert (await client.get(f"{path}?expires=4102444800&sig={sig}")).status == 404


async def test_without_a_secret_key_filesystem_parts_get_no_link(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    monkeypatch.delenv("UJOBS_SECRET_KEY", raising=False)
    client = await api(aiohttp_client, pg_dsn, monkeypatch, UJOBS_EXPORT_URL=str(tmp_path))
    job_id = await exported(driver)
    body = await (await client.get(f"/v1/exports/{job_id}")).json()
    assert [p["url"] for p in body["parts"]] == [None, None, None]
    assert (await client.get(f"{part_path(job_id, 0)}?expires=1&sig=x")).status == 403


async def test_on_s3_each_part_links_to_a_presigned_url(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    local_s3: LocalS3,
    driver: PostgresDriver,
) -> None:
    bucket = local_s3.bucket()
    client = await api(
        aiohttp_client,
        pg_dsn,
        monkeypatch,
        UJOBS_EXPORT_URL=f"s3://{bucket}",
        AWS_ENDPOINT_URL=local_s3.endpoint,
        AWS_ALLOW_HTTP="true",
        AWS_REGION="us-east-1",
        AWS_ACCESS_KEY_ID="testing",
        AWS_SECRET_ACCESS_KEY="testing",
    )
    job_id = await exported(driver)
    body = await (await client.get(f"/v1/exports/{job_id}")).json()
    whole = b""
    async with aiohttp.ClientSession() as http:
        for part in body["parts"]:
            assert part["url"].startswith(f"{local_s3.endpoint}/{bucket}/exports/org-1/e1/")
            assert "X-Amz-Signature=" in part["url"]
            async with http.get(part["url"]) as got:
                assert got.status == 200
                whole += await got.read()
    assert whole == expected_csv(25)


async def test_the_authorize_seam_hides_another_tenants_export(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    monkeypatch.setenv("UJOBS_EXPORT_URL", str(tmp_path))
    seen: list[str | None] = []

    def org_2(tenant: str | None) -> bool:
        seen.append(tenant)
        return tenant == "org-2"

    class Org2:
        operator = False

        def sees(self, tenant_id: str | None) -> bool:
            return org_2(tenant_id)

    async def only_org_2(request: web.Request) -> Reader:
        return Org2()

    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": "tests.exports.export_app:api"}),
        metrics=JobMetrics(CollectorRegistry()),
    )
    app[AUTHORIZE] = only_org_2  # what the token edge installs
    client = await aiohttp_client(app)
    job_id = await exported(driver)
    answer = await client.get(f"/v1/exports/{job_id}")
    assert answer.status == 404
    assert (await answer.json())["error"] == {
        "code": "X_EXPORT_NOT_FOUND",
        "message": f"no export {job_id!r}",
        "meta": {"id": job_id},
    }
    assert seen == ["org-1"]


async def test_a_tenant_token_reads_its_own_export_and_another_tenants_is_404(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    """Real tenant tokens through the api's own rule (``token_reader``): org-1's token gets
    org-1's export and its parts; org-2's gets the answer an unknown id gets, so it cannot
    even learn the export exists."""
    monkeypatch.setenv("UJOBS_EXPORT_URL", str(tmp_path))
    monkeypatch.setenv("UJOBS_SECRET_KEY", KEY)
    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": APP, "UJOBS_PUBLIC_URL": PUBLIC_URL}),
        metrics=JobMetrics(CollectorRegistry()),
    )
    client = await aiohttp_client(app)
    tokens = TokenStore(pg_pool)
    own = await tokens.create(tenant="org-1", scopes=("read",))
    other = await tokens.create(tenant="org-2", scopes=("read",))
    job_id = await exported(driver)

    def bearer(secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    mine = await client.get(f"/v1/exports/{job_id}", headers=bearer(own.secret))
    assert mine.status == 200
    whole = b""
    for part in (await mine.json())["parts"]:
        got = await client.get(part["url"].removeprefix(PUBLIC_URL))
        whole += await got.read()
    assert whole == expected_csv(25)

    theirs = await client.get(f"/v1/exports/{job_id}", headers=bearer(other.secret))
    unknown = await client.get(
        "/v1/exports/00000000-0000-7000-8000-000000000000", headers=bearer(other.secret)
    )
    assert (theirs.status, unknown.status) == (404, 404)
    codes = [(await r.json())["error"]["code"] for r in (theirs, unknown)]
    assert codes == ["X_EXPORT_NOT_FOUND", "X_EXPORT_NOT_FOUND"]


async def test_a_dead_export_tells_why_to_its_tenant_without_the_stack_and_hides_from_another(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    driver: PostgresDriver,
) -> None:
    """A dead export's read carries its job's last error: an operator token reads it whole
    (the stack too), org-1's token reads the code and message as a job's ``lastError`` is
    shown to a tenant, and org-2's token gets the 404 of an unknown id."""
    monkeypatch.setenv("UJOBS_EXPORT_URL", str(tmp_path))
    app = create_app(
        ApiConfig.load({"DATABASE_URL": pg_dsn, "UJOBS_APP": APP, "UJOBS_PUBLIC_URL": PUBLIC_URL}),
        metrics=JobMetrics(CollectorRegistry()),
    )
    client = await aiohttp_client(app)
    tokens = TokenStore(pg_pool)
    operator = await tokens.create(tenant=None, scopes=("read",))
    own = await tokens.create(tenant="org-1", scopes=("read",))
    other = await tokens.create(tenant="org-2", scopes=("read",))
    job_id = await enqueue(driver, broken_export, {"org_id": "org-1", "export_id": "b1"})
    assert (await attempt(driver, broken_export)).outcome == "dead-lettered"
    stored = await driver.introspect.get(job_id)
    assert stored is not None
    assert stored.last_error is not None

    def bearer(secret: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {secret}"}

    whole = await (
        await client.get(f"/v1/exports/{job_id}", headers=bearer(operator.secret))
    ).json()
    assert (whole["state"], whole["ready"], whole["parts"]) == ("dead", False, [])
    assert whole["lastError"] == stored.last_error
    assert whole["lastError"].startswith("X_EXPORT_TENANCY_UNDECLARED: keyset('orders')")
    assert "Traceback" in whole["lastError"]

    mine = await client.get(f"/v1/exports/{job_id}", headers=bearer(own.secret))
    assert mine.status == 200
    body = await mine.json()
    assert body["state"] == "dead"
    assert body["lastError"] == error_summary(stored.last_error)
    assert body["lastError"].startswith("X_EXPORT_TENANCY_UNDECLARED: keyset('orders')")
    assert "Traceback" not in body["lastError"]
    assert "File " not in body["lastError"]

    theirs = await client.get(f"/v1/exports/{job_id}", headers=bearer(other.secret))
    assert theirs.status == 404
    assert (await theirs.json())["error"] == {
        "code": "X_EXPORT_NOT_FOUND",
        "message": f"no export {job_id!r}",
        "meta": {"id": job_id},
    }


def test_the_modules_docstring_states_each_routes_token_rule_and_the_tenancy() -> None:
    """The module's own account of its routes (read by whoever changes them): every route it
    serves, with the scope it takes, and the rule a tenant token meets, as the tests above
    prove it."""
    import ujobs.services.api.exports as module

    doc = module.__doc__ or ""
    assert "| Route | Scope | Answers |" in doc
    rows = [line for line in doc.splitlines() if line.startswith("| ``GET ")]
    served = [f"{route.method} {route.path}" for route in module.routes]  # type: ignore[attr-defined]
    assert [row.split("``")[1].split("?")[0] for row in rows] == served
    assert rows[0].split(" | ")[1] == "``read``"
    assert "the signed link is the credential" in rows[1]
    assert "another tenant's id answers exactly as an id that does not exist" in " ".join(
        doc.split()
    )
    assert "a tenant token reads the code and message without the stack" in " ".join(doc.split())
