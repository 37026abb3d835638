"""Two tenants on one live api, for the fuzzers' "nothing of another tenant" property: tenant A
plants jobs, runs, steps, an export, a webhook endpoint and an event, each carrying a string
no one else could guess; the fuzz then runs with tenant B's token, and any of A's strings in an
answer to B (that B did not send itself) is a leak.

``Planted.shared_run_id`` is A's ``runId`` the fuzzers hand B too (``order-42``: readable ids
collide): B may see it echoed on its own job, so it is not a leak string; the steps A's run
stored under it are."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import asyncpg
import orjson

from ujobs.services.api.tokens import TokenStore

SCOPES = ["enqueue:*", "read", "operate", "events:publish"]


@dataclass
class Planted:
    """What tenant A left behind, and the tokens of both tenants."""

    tenant_a: str
    tenant_b: str
    token_a: str
    token_b: str
    shared_run_id: str
    job_ids: list[str] = field(default_factory=list)
    endpoint_ids: list[str] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)
    """Every string of A's that must never reach B (ids, runIds, step names, markers)."""

    def leaks(self, answer: bytes | str, sent: bytes | str = b"") -> list[str]:
        """A's strings in ``answer`` that are not in what B ``sent`` (an echo is no leak)."""
        text = answer.decode("utf-8", "replace") if isinstance(answer, bytes) else answer
        mine = sent.decode("utf-8", "replace") if isinstance(sent, bytes) else sent
        return [s for s in self.strings if s in text and s not in mine]

    def document(self) -> dict[str, Any]:
        return {
            "tenantA": self.tenant_a,
            "tenantB": self.tenant_b,
            "sharedRunId": self.shared_run_id,
            "jobIds": self.job_ids,
            "endpointIds": self.endpoint_ids,
            "strings": self.strings,
        }


async def mint_tenants(dsn: str) -> tuple[str, str, str, str]:
    """(tenant A, its token, tenant B, its token): tenants are uuids (the sample app's
    ``send_mail`` takes ``org_id: t.uuid``)."""
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
    assert pool is not None
    try:
        store = TokenStore(pool)
        a, b = str(uuid.uuid4()), str(uuid.uuid4())
        token_a = await store.create(tenant=a, scopes=SCOPES, name="fuzz-tenant-a")
        token_b = await store.create(tenant=b, scopes=SCOPES, name="fuzz-tenant-b")
        return a, token_a.secret, b, token_b.secret
    finally:
        await pool.close()


STEP_COLUMNS = "select column_name from information_schema.columns where table_name = 'x_job_steps'"


async def store_step(conn: asyncpg.Connection[Any], tenant: str, run_id: str, name: str) -> str:
    """A completed step of ``run_id`` as a worker stores it (with its run's tenant where the
    schema keys steps by tenant); answers its output's marker string."""
    output = f"a-output-{run_id}"
    columns = ["run_id", "name", "output", "started_at", "finished_at"]
    values = ["$1", "$2", "$3::jsonb", "now()", "now()"]
    args: list[Any] = [run_id, name, orjson.dumps({"s": output}).decode()]
    if "tenant_id" in {r["column_name"] for r in await conn.fetch(STEP_COLUMNS)}:
        columns.append("tenant_id")
        values.append("$4")
        args.append(tenant)
    statement = f"insert into x_job_steps ({', '.join(columns)}) values ({', '.join(values)})"
    await conn.execute(statement, *args)
    return output


async def plant(url: str, dsn: str) -> Planted:
    """Tenant A's jobs (``fuzz.open``, ``send_mail``, ``orders.export`` of
    ``tests/chaos/fuzz_app.py``), an endpoint and an event over HTTP with A's token; the steps
    A's two runs stored, written as a worker would (no worker runs here)."""
    a, token_a, b, token_b = await mint_tenants(dsn)
    mark = uuid.uuid4().hex[:12]
    private_run, shared = f"a-run-{mark}", f"order-42-{mark}"
    planted = Planted(a, b, token_a, token_b, shared_run_id=shared)
    markers = {
        "key": f"a-key-{mark}",
        "secret": f"a-secret-{mark}",
        "to": f"a-{mark}@example.com",
        "subject": f"a-subject-{mark}",
        "export": f"a-export-{mark}",
        "host": f"a-{mark}.example.com",
        "event": f"a-event-{mark}",
    }
    export = {"org_id": a, "export_id": markers["export"], "rows": 3, "slow_ms": 0}
    enqueues = [
        ("fuzz.open", {"org_id": a, "key": markers["key"], "data": markers["secret"]}, private_run),
        ("send_mail", {"to": markers["to"], "subject": markers["subject"], "org_id": a}, shared),
        ("orders.export", export, None),
    ]
    headers = {"Authorization": f"Bearer {token_a}"}
    async with aiohttp.ClientSession(headers=headers) as http:
        for job, data, run_id in enqueues:
            body: dict[str, Any] = {"input": data}
            if run_id is not None:
                body["runId"] = run_id
            async with http.post(f"{url}/v1/jobs/{job}", json=body) as reply:
                answer = await reply.json()
                assert reply.status == 202, answer
            planted.job_ids.append(answer["id"])
        endpoint = {"url": f"https://{markers['host']}/hooks", "topics": [f"a.{mark}"]}
        async with http.post(f"{url}/v1/webhooks/endpoints", json=endpoint) as reply:
            answer = await reply.json()
            assert reply.status in (200, 201), answer
        planted.endpoint_ids.append(answer["id"])
        event = {"payload": {"s": markers["event"]}}
        async with http.post(f"{url}/v1/events/a.{mark}", json=event) as reply:
            assert reply.status < 300, await reply.text()
    conn = await asyncpg.connect(dsn)
    try:
        for run_id in (private_run, shared):
            step = f"a-step-{run_id}"
            planted.strings += [step, await store_step(conn, a, run_id, step)]
    finally:
        await conn.close()
    planted.strings += [a, private_run, *planted.job_ids, *planted.endpoint_ids]
    planted.strings += list(markers.values())
    return planted
