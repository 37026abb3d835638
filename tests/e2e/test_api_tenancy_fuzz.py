"""Two tenants on one live ``ujobs api`` (``tests/chaos/fuzz_app.py``): tenant A plants its jobs,
runs, steps, an export, a webhook endpoint and an event (``tests/chaos/tenants.py``), then
everything runs with tenant B's token.

* schemathesis over ``/v1/openapi.json`` (examples, coverage, fuzzing, and the stateful phase
  following the document's links from each enqueue to the job it made), its generation steered
  by ``tests/e2e/schemathesis_tenancy_hooks.py`` (A's ids in the paths, A's tenant in the
  queries, B's own tenant and A's readable ``runId`` in the enqueues): no 5xx, no
  ``X_INTERNAL``, and no answer holds a string of A's that the request did not carry.
* A sweep of every route that takes an id, with each of A's ids: the answer is exactly the
  answer to an id that does not exist (the id itself aside): the same status, the same body.
* B enqueues under A's readable ``runId``: B's job shows none of A's steps, and B's cancel and
  ``retry --from-step`` leave A's steps where they are.

Budget (CI, 2 cores): schemathesis with ``MAX_EXAMPLES`` examples an operation and
``STATEFUL_MAX_EXAMPLES`` scenarios, a fixed seed, one worker: about 60 s, under a
``SCHEMATHESIS_TIMEOUT_S`` bound; the sweep and the runId test a few seconds each."""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import pytest

from tests.chaos.tenants import Planted, plant
from tests.e2e.live_api import live_api
from tests.e2e.service_process import ROOT
from ujobs.webhooks.store_pg import new_secret_key

APP = "tests.chaos.fuzz_app:api"
SEED = "37"
MAX_EXAMPLES = "25"
STATEFUL_MAX_EXAMPLES = "30"
SCHEMATHESIS_TIMEOUT_S = 240
CONFIG = """
[phases.stateful.inference]
algorithms = ["location-headers"]
"""
"""The document's own links are what the stateful phase follows (``test_api_schemathesis.py``
says why schemathesis's dependency inference is left out)."""
JOB_ROUTES = [
    ("GET", "/v1/jobs/{id}"),
    ("GET", "/v1/jobs/{id}/result"),
    ("GET", "/v1/jobs/{id}/result?wait=30s"),
    ("POST", "/v1/jobs/{id}/cancel"),
    ("POST", "/v1/jobs/{id}/retry"),
    ("POST", "/v1/jobs/{id}/promote"),
    ("DELETE", "/v1/jobs/{id}"),
    ("GET", "/v1/exports/{id}"),
    ("GET", "/v1/exports/{id}/parts/0?expires=4102444800&sig=" + "0" * 64),
]
ENDPOINT_ROUTES = [
    ("POST", "/v1/webhooks/endpoints/{id}/disable"),
    ("POST", "/v1/webhooks/endpoints/{id}/enable"),
    ("POST", "/v1/webhooks/endpoints/{id}/rotate-secret"),
    ("GET", "/v1/webhooks/endpoints/{id}/deliveries"),
]


def _api(pg_dsn: str) -> Any:
    # No worker runs: a ?wait= is held to its end, so it is capped short (test_api_schemathesis).
    return live_api(pg_dsn, app=APP, UJOBS_SECRET_KEY=new_secret_key(), UJOBS_API_MAX_WAIT_MS="500")


@pytest.mark.timeout(SCHEMATHESIS_TIMEOUT_S + 60)
def test_schemathesis_as_tenant_b_finds_no_5xx_and_nothing_of_tenant_a(
    pg_dsn: str, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(CONFIG)
    planted_file = tmp_path / "planted.json"
    with _api(pg_dsn) as api:
        planted = asyncio.run(plant(api.url, pg_dsn))
        planted_file.write_text(json.dumps(planted.document()))
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": "tests.e2e.schemathesis_tenancy_hooks",
            "UJOBS_FUZZ_PLANTED": str(planted_file),
        }
        result = subprocess.run(
            [
                sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
                "run", f"{api.url}/v1/openapi.json",
                "--checks", "not_a_server_error,no_x_internal,nothing_of_another_tenant",
                "--phases", "examples,coverage,fuzzing,stateful",
                # The generic enqueue's random job names are 404s; the per-job enqueues are
                # where the stateful links start (test_api_schemathesis.py).
                "--exclude-operation-id", "enqueue",
                "--max-examples", MAX_EXAMPLES,
                "--seed", SEED,
                "--workers", "1",
                "--no-color",
                "--header", f"Authorization: Bearer {planted.token_b}",
            ],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=SCHEMATHESIS_TIMEOUT_S,
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-4000:]
    covered = re.search(r"API Links:\s+(\d+) covered", result.stdout)
    print(f"schemathesis as tenant B: {covered.group(0) if covered else result.stdout[-600:]}")
    assert covered is not None, result.stdout[-4000:]
    assert int(covered.group(1)) >= 3, result.stdout[-4000:]


def _twin(value: str) -> str:
    """An id of the same shape that names nothing: its last eight hex digits shifted by one."""
    head, tail = value[:-8], value[-8:]
    shifted = "".join(f"{(int(c, 16) + 1) % 16:x}" if c in "0123456789abcdef" else c for c in tail)
    return head + shifted


async def _answer(
    http: aiohttp.ClientSession, url: str, method: str, route: str, value: str
) -> tuple[int, str]:
    async with http.request(method, url + route.replace("{id}", value)) as reply:
        text = await reply.text()
        return reply.status, text.replace(value, "{id}")


async def _sweep(url: str, planted: Planted) -> list[str]:
    findings: list[str] = []
    headers = {"Authorization": f"Bearer {planted.token_b}"}
    targets = [(route, value) for route in JOB_ROUTES for value in planted.job_ids]
    targets += [(route, value) for route in ENDPOINT_ROUTES for value in planted.endpoint_ids]
    async with aiohttp.ClientSession(headers=headers) as http:
        for (method, route), value in targets:
            nothing = await _answer(http, url, method, route, _twin(value))
            foreign = await _answer(http, url, method, route, value)
            if foreign != nothing:
                findings.append(
                    f"{method} {route} with tenant A's id answers {foreign[0]} {foreign[1][:200]}"
                    f" where an unknown id answers {nothing[0]} {nothing[1][:200]}"
                )
    return findings


def test_another_tenants_ids_answer_as_ids_that_do_not_exist(pg_dsn: str) -> None:
    with _api(pg_dsn) as api:
        planted = asyncio.run(plant(api.url, pg_dsn))
        findings = asyncio.run(_sweep(api.url, planted))
    assert findings == [], "\n".join(findings)


STEPS_OF = "select name from x_job_steps where run_id = $1 order by name"


async def _borrow_run_id(url: str, dsn: str, planted: Planted) -> list[str]:
    findings: list[str] = []
    conn = await asyncpg.connect(dsn)
    try:
        before = [r["name"] for r in await conn.fetch(STEPS_OF, planted.shared_run_id)]
        headers = {"Authorization": f"Bearer {planted.token_b}"}
        body = {
            "input": {"to": "b@example.com", "subject": "b", "org_id": planted.tenant_b},
            "runId": planted.shared_run_id,
        }
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.post(f"{url}/v1/jobs/send_mail", json=body) as reply:
                answer = await reply.text()
                if reply.status >= 500:
                    findings.append(f"enqueue under A's runId: {reply.status} {answer[:200]}")
                if reply.status != 202:
                    return findings  # refused with a 4xx: the other way the issue allows
            job_id = json.loads(answer)["id"]
            async with http.get(f"{url}/v1/jobs/{job_id}") as reply:
                shown = await reply.text()
            if leaked := planted.leaks(shown):
                findings.append(f"B's job under A's runId shows A's {leaked}")
            async with http.post(f"{url}/v1/jobs/{job_id}/cancel") as reply:
                await reply.read()
            for step in before:
                async with http.post(
                    f"{url}/v1/jobs/{job_id}/retry", json={"fromStep": step}
                ) as reply:
                    await reply.read()
        after = [r["name"] for r in await conn.fetch(STEPS_OF, planted.shared_run_id)]
        if after != before:
            findings.append(f"B's cancel and retry --from-step left A's steps {after} of {before}")
    finally:
        await conn.close()
    return findings


def test_a_run_id_of_another_tenant_shows_and_deletes_none_of_its_steps(pg_dsn: str) -> None:
    with _api(pg_dsn) as api:
        planted = asyncio.run(plant(api.url, pg_dsn))
        findings = asyncio.run(_borrow_run_id(api.url, pg_dsn, planted))
    assert findings == [], "\n".join(findings)
