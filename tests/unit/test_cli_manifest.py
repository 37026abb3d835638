"""``ujobs manifest --app module:attr`` as a real process: every descriptor as JSON, each job's
input JSON Schema, and a clear ``X_CONFIG_INVALID`` with a non-zero exit for a bad ``--app``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

ROOT = Path(__file__).resolve().parents[2]
APP = "tests.unit.sample_app:api"


def ujobs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k != "UJOBS_APP"}
    environment.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "ujobs.services.cli", *args],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(scope="module")
def manifest() -> dict[str, Any]:
    done = ujobs("manifest", "--app", APP)
    assert done.returncode == 0, done.stderr
    document: dict[str, Any] = orjson.loads(done.stdout)
    return document


def test_it_prints_every_job_and_task(manifest: dict[str, Any]) -> None:
    assert [row["name"] for row in manifest["jobs"]] == [
        "billing.charge",
        "invoice",
        "notify",
        "refund",
        "send_mail",
    ]
    [nightly] = manifest["tasks"]
    assert nightly["name"] == "nightly_digest"
    assert (nightly["cron"], nightly["tz"], nightly["catchUp"]) == (
        "0 3 * * *",
        "America/Bogota",
        "run-once",
    )
    assert nightly["jobs"] == ["notify"]


def test_every_job_carries_its_input_json_schema(manifest: dict[str, Any]) -> None:
    jobs = {row["name"]: row for row in manifest["jobs"]}
    for row in jobs.values():
        assert row["kind"] == "job"
        assert row["input"]["type"] == "object"
        assert "properties" in row["input"]
    notify = jobs["notify"]["input"]
    assert notify["properties"]["user_id"]["format"] == "uuid"
    assert notify["properties"]["items"]["items"]["required"] == ["id"]
    assert jobs["billing.charge"]["input"]["title"] == "ChargeInput"  # a pydantic model
    assert jobs["refund"]["input"]["required"] == ["org_id", "cents"]  # a dataclass
    assert jobs["invoice"]["input"]["properties"]["lines"]["type"] == "array"  # a TypedDict
    assert jobs["send_mail"]["retry"]["attempts"] == 5
    assert jobs["billing.charge"]["concurrency"] == {"keyed": True, "limit": 1, "whenBusy": "fail"}


def test_ujobs_app_in_the_environment_does_the_same(manifest: dict[str, Any]) -> None:
    done = ujobs("manifest", env={"UJOBS_APP": APP})
    assert done.returncode == 0, done.stderr
    assert orjson.loads(done.stdout) == manifest


@pytest.mark.parametrize(
    ("app", "says"),
    [
        ("tests.unit.sample_app", "module:attribute"),
        ("tests.unit.no_such_module:api", "cannot import"),
        ("tests.unit.sample_app:missing", "is nothing"),
        ("tests.unit.sample_app:mail", "not the Api"),
    ],
)
def test_a_bad_app_is_x_config_invalid_and_a_non_zero_exit(app: str, says: str) -> None:
    done = ujobs("manifest", "--app", app)
    assert done.returncode != 0
    assert done.stdout == ""
    assert done.stderr.startswith("X_CONFIG_INVALID: ")
    assert says in done.stderr
    assert "Traceback" not in done.stderr


def test_json_prints_the_failure_as_json() -> None:
    done = ujobs("manifest", "--app", "nope", "--json")
    assert done.returncode != 0
    error = orjson.loads(done.stdout)["error"]
    assert error["code"] == "X_CONFIG_INVALID"
    assert error["meta"] == {"variable": "UJOBS_APP"}


def test_an_app_refused_at_define_api_prints_that_code() -> None:
    done = ujobs("manifest", "--app", "tests.unit.broken_app:api")
    assert done.returncode != 0
    assert done.stderr.startswith("X_JOB_DUPLICATE: ")
    assert "'alert'" in done.stderr
