"""Tenancy by edge against a real ``ujobs api`` and a real ``ujobs exporter``, two tenants'
tokens, over HTTP only:

* a tenant's export of a table holding every tenant's rows (``keyset(tenant_column=...)``, no
  ``where``) carries none of the other tenant's rows, on the COPY road and the rows road;
* every route that takes an id answers another tenant's id byte for byte (the id aside) as it
  answers an id that does not exist: the export routes, the dashboard's export and job pages,
  the job reads and actions, the webhook endpoint actions — and a request with no token is
  told nothing about either.
"""

from __future__ import annotations

import asyncio
import base64
import csv
import io
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from ujobs.ids import new_id
from ujobs.services.api.tokens import TokenStore
from ujobs.services.dashboard.session import COOKIE, csrf_token

pytestmark = pytest.mark.slow

ORG_A = "org-a"
ORG_B = "org-b"
KEY = base64.b64encode(bytes(range(32))).decode()
SCOPES = ("enqueue:*", "read", "operate")
# Ten rows of A, seven of B, interleaved by key so every page of a leak would show it.
ROWS = [(i, ORG_A if i % 3 else ORG_B, f"order {i}") for i in range(1, 18)]

PUBLIC_URL = "https://jobs.example.test"
"""Where the api says its links are (``UJOBS_PUBLIC_URL``)."""


@dataclass
class Stack:
    url: str
    http: aiohttp.ClientSession
    tokens: dict[str, str]

    async def call(
        self, method: str, path: str, who: str | None, *, body: Any = None, cookie: bool = False
    ) -> tuple[int, bytes]:
        """``who``'s bearer token, or (``cookie``) its dashboard session; a dashboard POST
        carries the session's CSRF token and this origin, as the dashboard's own form does."""
        headers: dict[str, str] = {}
        options: dict[str, Any] = {"json": body}
        if who is not None and cookie:
            headers["Cookie"] = f"{COOKIE}={self.tokens[who]}"
            if method == "POST":
                headers["Origin"] = self.url
                options = {"data": {**body, "csrf": csrf_token(self.tokens[who])}}
        elif who is not None:
            headers["Authorization"] = f"Bearer {self.tokens[who]}"
        async with self.http.request(
            method, self.url + path, headers=headers, allow_redirects=False, **options
        ) as answer:
            return answer.status, await answer.read()

    async def json(self, method: str, path: str, who: str, body: Any = None) -> Any:
        status, raw = await self.call(method, path, who, body=body)
        assert status < 300, raw
        return orjson.loads(raw)


@pytest.fixture
async def stack(pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path) -> AsyncIterator[Stack]:
    async with pg_pool.acquire() as conn:
        # The database is this pytest process's: the table is this test's, dropped after it.
        await conn.execute(
            "CREATE TABLE app_orders (id bigint PRIMARY KEY, org_id text NOT NULL, label text)"
        )
        await conn.executemany("INSERT INTO app_orders VALUES ($1, $2, $3)", ROWS)
    store = TokenStore(pg_pool)
    tokens = {
        "a": (await store.create(tenant=ORG_A, scopes=SCOPES)).secret,
        "b": (await store.create(tenant=ORG_B, scopes=SCOPES)).secret,
    }
    env = service_env(
        DATABASE_URL=pg_dsn,
        UJOBS_APP="tests.exports.export_app:api",
        UJOBS_EXPORT_URL=str(tmp_path / "store"),
        UJOBS_SECRET_KEY=KEY,
        UJOBS_PUBLIC_URL=PUBLIC_URL,
    )
    api = await ServiceProcess.start("api", "--port", "0", env=env)
    exporter = await ServiceProcess.start("exporter", env=env)
    try:
        listening = await api.log_event("ujobs.api.listening")
        await exporter.log_event("ujobs.service.started")
        async with aiohttp.ClientSession() as http:
            yield Stack(url=f"http://{listening['addresses'][0]}", http=http, tokens=tokens)
    finally:
        await api.kill()
        await exporter.kill()
        await pg_pool.execute("DROP TABLE app_orders")


async def _exported(stack: Stack, who: str, job: str, export_id: str) -> dict[str, Any]:
    """``who``'s export, enqueued and read back over HTTP once its job is done."""
    org = ORG_A if who == "a" else ORG_B
    body = {"input": {"org_id": org, "export_id": export_id}}
    job_id = (await stack.json("POST", f"/v1/jobs/{job}", who, body))["id"]
    async with asyncio.timeout(60):
        while (doc := await stack.json("GET", f"/v1/exports/{job_id}", who))["state"] != "done":
            assert doc["state"] not in ("dead", "failed"), doc
            await asyncio.sleep(0.1)
    assert doc["ready"], doc
    return dict(doc)


@pytest.mark.parametrize("job", ["app_orders.export", "app_orders.rows"], ids=["copy", "rows"])
async def test_a_tenants_export_carries_none_of_another_tenants_rows(
    stack: Stack, job: str
) -> None:
    doc = await _exported(stack, "b", job, "e1")
    whole = b""
    for part in doc["parts"]:
        # The link names UJOBS_PUBLIC_URL; the api listens on a port of its own.
        link = stack.url + part["url"].removeprefix(PUBLIC_URL)
        async with stack.http.get(link) as got:
            assert got.status == 200
            whole += await got.read()
    rows = list(csv.reader(io.StringIO(whole.decode(), newline="")))
    assert rows[0] == ["id", "org_id", "label"]
    assert rows[1:] == [[str(i), org, label] for i, org, label in ROWS if org == ORG_B]


def _same_modulo_id(
    theirs: tuple[int, bytes], unknown: tuple[int, bytes], ids: tuple[str, str]
) -> bool:
    their_id, unknown_id = ids
    status, body = theirs
    return (status, body.replace(their_id.encode(), unknown_id.encode())) == unknown


async def test_another_tenants_ids_answer_as_ids_that_do_not_exist(stack: Stack) -> None:
    doc = await _exported(stack, "b", "app_orders.export", "e2")
    plain = await stack.json("POST", "/v1/jobs/org.job", "b", {"input": {"org_id": ORG_B}})
    endpoint = await stack.json(
        "POST", "/v1/webhooks/endpoints", "b", {"url": "https://partner.example/hook"}
    )
    missing = new_id()
    missing_endpoint = f"ep_{new_id()}"
    act = {"action": "cancel", "confirm": "yes", "back": "/_x/jobs"}
    routes: list[tuple[str, str, str | None, bool, Any]] = [
        ("GET", "/v1/exports/{id}", None, False, None),
        ("GET", "/v1/exports/{id}", "a", False, None),
        ("GET", "/_x/exports/{id}", "a", True, None),
        ("GET", "/v1/exports/{id}/parts/0?expires=9999999999&sig=00", None, False, None),
        ("GET", "/v1/jobs/{id}", "a", False, None),
        ("GET", "/v1/jobs/{id}/result?wait=30s", "a", False, None),
        ("GET", "/_x/jobs/{id}", "a", True, None),
        ("POST", "/v1/jobs/{id}/cancel", "a", False, None),
        ("POST", "/v1/jobs/{id}/retry", "a", False, None),
        ("POST", "/v1/jobs/{id}/promote", "a", False, None),
        ("DELETE", "/v1/jobs/{id}", "a", False, None),
        ("POST", "/_x/act", "a", True, act),
    ]
    differ: list[tuple[str, str, str | None, list[tuple[int, bytes]]]] = []
    # B's export, and B's job that is not an export (once answered "not an export", naming it).
    for theirs in (doc["id"], plain["id"]):
        for method, path, who, cookie, form in routes:
            answered = [
                await stack.call(
                    method,
                    path.format(id=job_id),
                    who,
                    cookie=cookie,
                    body=None if form is None else {**form, "target": job_id},
                )
                for job_id in (theirs, missing)
            ]
            # No token: 401; a forged part link: 403; otherwise the unknown id's 404.
            expected = 403 if "/parts/" in path else 401 if who is None else 404
            assert answered[1][0] == expected, (path, answered[1])
            if not _same_modulo_id(answered[0], answered[1], (theirs, missing)):
                differ.append((method, path, who, answered))
    endpoint_act = {"action": "endpoint-disable", "confirm": "yes", "back": "/_x/webhooks"}
    for method, path, cookie, form in [
        ("GET", "/v1/webhooks/endpoints/{id}/deliveries", False, None),
        ("POST", "/v1/webhooks/endpoints/{id}/disable", False, None),
        ("POST", "/v1/webhooks/endpoints/{id}/enable", False, None),
        ("POST", "/v1/webhooks/endpoints/{id}/rotate-secret", False, None),
        ("GET", "/_x/webhooks/{id}", True, None),
        ("POST", "/_x/act", True, endpoint_act),
    ]:
        answered = [
            await stack.call(
                method,
                path.format(id=endpoint_id),
                "a",
                cookie=cookie,
                body=None if form is None else {**form, "target": endpoint_id},
            )
            for endpoint_id in (endpoint["id"], missing_endpoint)
        ]
        assert answered[1][0] == 404, (path, answered[1])
        if not _same_modulo_id(answered[0], answered[1], (endpoint["id"], missing_endpoint)):
            differ.append((method, path, "a", answered))
    assert differ == []
    # Nothing of B's moved: its export is still there, done, for B.
    again = await stack.json("GET", f"/v1/exports/{doc['id']}", "b")
    assert (again["state"], again["ready"]) == ("done", True)
