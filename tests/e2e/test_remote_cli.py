"""The operator CLI against a live ``ujobs api`` with ``UJOBS_URL`` + ``UJOBS_TOKEN`` (the
variables the "Enqueue from any language" guide exports) and no ``DATABASE_URL``: the commands
with a route work remotely under the token's tenancy, the others say they need DATABASE_URL."""

from __future__ import annotations

import asyncio
import socket
import subprocess
import sys
import urllib.request
from typing import Any

import asyncpg
import orjson

from tests.e2e.live_api import LiveApi, live_api
from tests.e2e.service_process import ROOT, service_env
from tests.services.api_support import ORG_A, ORG_B, mail
from ujobs.services.api.tokens import TokenStore


def _cli(*args: str, **env: str) -> tuple[int, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "ujobs.services.cli", *args, "--json"],
        cwd=ROOT, env=service_env(**env), capture_output=True, text=True, timeout=120,
        check=False,
    )  # fmt: skip
    assert done.stdout.strip(), done.stderr
    return done.returncode, orjson.loads(done.stdout)


def _mint(dsn: str, tenant: str, *scopes: str) -> str:
    async def mint() -> str:
        pool = await asyncpg.create_pool(dsn, min_size=1, max_size=1)
        assert pool is not None
        try:
            return (await TokenStore(pool).create(tenant=tenant, scopes=scopes)).secret
        finally:
            await pool.close()

    return asyncio.run(mint())


def _enqueue(api: LiveApi, token: str, org: str) -> str:
    request = urllib.request.Request(
        f"{api.url}/v1/jobs/send_mail",
        data=orjson.dumps({"input": mail(org)}),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        job_id: str = orjson.loads(answer.read())["id"]
    return job_id


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
    return port


def test_the_snippets_variables_exported_the_cli_still_reads_the_database(pg_dsn: str) -> None:
    """The guide's UJOBS_URL / UJOBS_TOKEN beside DATABASE_URL: known variables, and the
    database wins (an operator's shell that also ran the snippets)."""
    with live_api(pg_dsn, tenant=ORG_A) as api:
        env = {"DATABASE_URL": pg_dsn, "UJOBS_URL": api.url, "UJOBS_TOKEN": api.tenant_token}
        code, listed = _cli("tokens", "list", **env)
        assert code == 0, listed
        # Read from the database: the tenant token (which the api would refuse) lists them all.
        assert {t["tenant"] for t in listed["tokens"]} == {None, ORG_A}
        code, queues = _cli("queues", "list", **env)
        assert code == 0, queues


def test_operator_commands_talk_to_a_remote_api_under_the_tokens_tenancy(pg_dsn: str) -> None:
    with live_api(pg_dsn, tenant=ORG_A) as api:
        token_a = api.tenant_token  # enqueue:*, read, tenant A
        token_b = _mint(pg_dsn, ORG_B, "enqueue:*", "read")
        job_a = _enqueue(api, token_a, ORG_A)
        job_b = _enqueue(api, token_b, ORG_B)
        operator = {"UJOBS_URL": api.url, "UJOBS_TOKEN": api.token}  # operator, admin
        as_a = {"UJOBS_URL": api.url, "UJOBS_TOKEN": token_a}
        as_b = {"UJOBS_URL": api.url, "UJOBS_TOKEN": token_b}

        code, listed = _cli("tokens", "list", **operator)
        assert code == 0, listed
        assert {t["tenant"] for t in listed["tokens"]} == {None, ORG_A, ORG_B}
        assert all("token" not in t for t in listed["tokens"])  # never a secret
        code, refused = _cli("tokens", "list", **as_a)
        assert (code, refused["error"]["code"]) == (1, "X_FORBIDDEN")

        code, page = _cli("jobs", "list", **operator)
        assert code == 0, page
        assert {j["id"] for j in page["jobs"]} == {job_a, job_b}
        code, page = _cli("jobs", "list", **as_a)
        assert (code, [j["id"] for j in page["jobs"]]) == (0, [job_a])
        code, page = _cli("jobs", "list", "--tenant", ORG_A, **as_b)  # its own tenant, whatever
        assert (code, [j["id"] for j in page["jobs"]]) == (0, [job_b])

        code, shown = _cli("jobs", "show", job_a[:12], **as_a)  # a unique start of the id
        assert code == 0, shown
        assert (shown["id"], shown["tenantId"]) == (job_a, ORG_A)
        assert shown["input"]["to"] != "a@example.com"  # redacted, as the api answers it
        code, hidden = _cli("jobs", "show", job_a, **as_b)
        assert (code, hidden["error"]["code"]) == (1, "X_JOB_NOT_FOUND")
        code, hidden = _cli("jobs", "show", job_a[:12], **as_b)
        assert (code, hidden["error"]["code"]) == (1, "X_JOB_NOT_FOUND")

        code, queues = _cli("queues", "list", **operator)
        assert code == 0, queues
        assert [q["queue"] for q in queues["queues"]] == ["default"]
        code, refused = _cli("queues", "list", **as_a)
        assert (code, refused["error"]["code"]) == (1, "X_FORBIDDEN")
        code, shown = _cli("queues", "show", "default", **operator)
        assert code == 0, shown
        assert sorted((t["tenantId"], t["due"]) for t in shown["tenants"]) == [
            (ORG_A, 1),
            (ORG_B, 1),
        ]
        code, refused = _cli("queues", "show", "default", **as_a)  # would name tenant B
        assert (code, refused["error"]["code"]) == (1, "X_FORBIDDEN")

        # What the api cannot answer is refused, never silently dropped.
        code, refused = _cli("jobs", "show", job_a, "--show-input", **operator)
        assert (code, refused["error"]["code"]) == (1, "X_CONFIG_INVALID")
        assert "--show-input" in refused["error"]["message"]
        # A command with no route names DATABASE_URL.
        for command in (("workers",), ("jobs", "cancel", job_a), ("tokens", "revoke", "tok_x")):
            code, refused = _cli(*command, **operator)
            assert (code, refused["error"]["code"]) == (1, "X_CONFIG_INVALID"), command
            assert refused["error"]["meta"]["variable"] == "DATABASE_URL"
            assert "jobs list" in refused["error"]["message"]


def test_remote_configuration_errors_name_the_variable() -> None:
    code, refused = _cli("jobs", "list", UJOBS_URL="http://127.0.0.1:1")
    assert (code, refused["error"]["code"]) == (1, "X_CONFIG_INVALID")
    assert refused["error"]["meta"]["variable"] == "UJOBS_TOKEN"
    code, refused = _cli("jobs", "list", UJOBS_URL="ftp://x", UJOBS_TOKEN="t")
    assert refused["error"]["meta"]["variable"] == "UJOBS_URL"
    url = f"http://127.0.0.1:{_closed_port()}"
    code, refused = _cli("tokens", "list", UJOBS_URL=url, UJOBS_TOKEN="t")
    assert (code, refused["error"]["code"]) == (1, "X_API_UNREACHABLE")
