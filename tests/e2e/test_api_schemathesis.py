"""The api's OpenAPI document is valid, and a bounded schemathesis run (a fixed seed, a few
examples an operation) against a live ``ujobs api`` finds no 5xx and no response outside the
document."""

from __future__ import annotations

import subprocess
import sys

from openapi_spec_validator import validate

from services.api_openapi import openapi_document
from services.app_loader import load_api
from tests.e2e.live_api import live_api
from tests.e2e.service_process import ROOT
from webhooks.store_pg import new_secret_key

SEED = "23"
MAX_EXAMPLES = "8"


def test_the_document_is_valid_openapi_3_1() -> None:
    validate(openapi_document(load_api("tests.unit.sample_app:api")))


def test_schemathesis_finds_nothing_against_a_live_api(pg_dsn: str) -> None:
    # A key, so the webhook endpoint routes are exercised rather than all 503.
    with live_api(pg_dsn, UJOBS_SECRET_KEY=new_secret_key()) as api:
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
