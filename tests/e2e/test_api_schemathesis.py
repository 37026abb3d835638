"""The api's OpenAPI document is valid, and a bounded schemathesis run (a fixed seed, a few
examples an operation) against a live ``ujobs api`` finds no 5xx and no response outside the
document; a stateful run follows the document's links from an enqueue to the job it made
(show, cancel, retry, promote, delete)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from openapi_spec_validator import validate

from tests.e2e.live_api import live_api
from tests.e2e.service_process import ROOT
from ujobs.services.api.openapi import openapi_document
from ujobs.services.runtime.app_loader import load_api
from ujobs.webhooks.store_pg import new_secret_key

WAIT_CAP_MS = "500"
"""No worker runs here, so every ``?wait=`` the fuzzer picks is held to its end: capped at half
a second (longer ones are the documented 400), no request outlives schemathesis's timeout."""
SEED = "23"
MAX_EXAMPLES = "8"
STATEFUL_SEED = "29"
STATEFUL_MAX_EXAMPLES = "40"
STATEFUL_CONFIG = """
[phases.stateful.inference]
algorithms = ["location-headers"]
"""
"""schemathesis's dependency analysis reads each job's ``org_id`` / ``user_id`` input as a
reference to a resource nothing produces and never starts a scenario from the per-job enqueues;
the document's own links are what the stateful phase should follow."""


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(openapi_document(load_api("tests.unit.sample_app:api")))


def test_schemathesis_finds_nothing_against_a_live_api(pg_dsn: str) -> None:
    # A key, so the webhook endpoint routes are exercised rather than all 503.
    with live_api(
        pg_dsn, UJOBS_SECRET_KEY=new_secret_key(), UJOBS_API_MAX_WAIT_MS=WAIT_CAP_MS
    ) as api:
        result = subprocess.run(
            [
                sys.executable, "-m", "schemathesis.cli", "run", f"{api.url}/v1/openapi.json",
                "--checks", "not_a_server_error,status_code_conformance,"
                "content_type_conformance,response_schema_conformance,"
                "response_headers_conformance",
                "--phases", "examples,coverage,fuzzing",
                "--max-examples", MAX_EXAMPLES,
                "--seed", SEED,
                "--workers", "1",
                "--no-color",
                "--header", f"Authorization: Bearer {api.token}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-4000:]


def test_schemathesis_stateful_follows_the_links_from_an_enqueue(
    pg_dsn: str, tmp_path: Path
) -> None:
    config = tmp_path / "schemathesis.toml"
    config.write_text(STATEFUL_CONFIG)
    with live_api(pg_dsn, UJOBS_API_MAX_WAIT_MS=WAIT_CAP_MS) as api:
        result = subprocess.run(
            [
                sys.executable, "-m", "schemathesis.cli", "--config-file", str(config),
                "run", f"{api.url}/v1/openapi.json",
                "--checks", "not_a_server_error,status_code_conformance,"
                "content_type_conformance,response_schema_conformance,use_after_free,"
                "ensure_resource_availability",
                "--phases", "stateful",
                # The generic POST /v1/jobs/{job} would be the only entry point schemathesis
                # trusts, and a random job name is a 404: start from the per-job enqueues.
                "--exclude-operation-id", "enqueue",
                "--max-examples", STATEFUL_MAX_EXAMPLES,
                "--seed", STATEFUL_SEED,
                "--workers", "1",
                "--no-color",
                "--header", f"Authorization: Bearer {api.token}",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )  # fmt: skip
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-4000:]
    covered = re.search(r"API Links:\s+(\d+) covered", result.stdout)
    assert covered is not None, result.stdout[-4000:]
    print(f"schemathesis stateful: {covered.group(0)}")
    assert int(covered.group(1)) >= 5, result.stdout[-4000:]
