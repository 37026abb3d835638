"""The partner kit: webhooks/verify/vectors.json is what the signer produces, and the Python,
Node, Java and Go verifiers each give every vector its expected answer."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.webhooks.vectors_source import render
from ujobs.webhooks.errors import WebhookSignatureInvalidError
from ujobs.webhooks.signature import verify_standard, verify_ultimate

KIT = Path(__file__).resolve().parents[2] / "webhooks" / "verify"
VECTORS = KIT / "vectors.json"


def cases() -> list[tuple[str, dict[str, Any]]]:
    loaded = orjson.loads(VECTORS.read_bytes())
    return [(scheme, case) for scheme in ("standard", "ultimate") for case in loaded[scheme]]


def run(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(
        args,
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout + done.stderr


def assert_every_case_passed(output: str) -> None:
    assert "FAIL" not in output
    assert output.count("ok ") == len(cases()), output


def test_the_vectors_are_what_the_signer_produces() -> None:
    assert VECTORS.read_bytes() == render(), (
        "regenerate: .venv/bin/python -m tests.webhooks.vectors_source > "
        "webhooks/verify/vectors.json"
    )
    assert len(cases()) >= 25
    assert {c["valid"] for _, c in cases()} == {True, False}


@pytest.mark.parametrize(("scheme", "case"), cases(), ids=lambda v: str(v))
def test_our_own_verifier_agrees_with_every_vector(scheme: str, case: dict[str, Any]) -> None:
    verify = verify_standard if scheme == "standard" else verify_ultimate
    try:
        verify(case["secrets"], case["headers"], case["body"], case["tolerance"], now_s=case["now"])
        valid = True
    except WebhookSignatureInvalidError:
        valid = False
    assert valid is case["valid"], case["name"]


def test_the_python_verifier() -> None:
    output = run([sys.executable, "verify_webhook.py", str(VECTORS)], KIT / "python")
    assert_every_case_passed(output)


@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
def test_the_node_verifier() -> None:
    output = run(["node", "verify-webhook.mjs", str(VECTORS)], KIT / "node")
    assert_every_case_passed(output)


@pytest.mark.skipif(shutil.which("javac") is None, reason="a JDK is not installed")
def test_the_java_verifier(tmp_path: Path) -> None:
    sources = sorted(str(p) for p in (KIT / "java").glob("*.java"))
    run(["javac", "-d", str(tmp_path), *sources], KIT / "java")
    output = run(["java", "-cp", str(tmp_path), "VerifyVectors", str(VECTORS)], KIT / "java")
    assert_every_case_passed(output)


@pytest.mark.skipif(shutil.which("go") is None, reason="go is not installed (.ci/run installs it)")
def test_the_go_verifier(tmp_path: Path) -> None:
    env = {
        "GOTOOLCHAIN": "local",
        "GOFLAGS": "-mod=mod",
        "GOCACHE": str(tmp_path / "cache"),
        "GOPATH": str(tmp_path / "gopath"),
        "VECTORS": str(VECTORS),
    }
    output = run(["go", "test", "-count=1", "-v", "./..."], KIT / "go", env)
    assert_every_case_passed(output.replace("ok  \tultimatejobs", "PASS\tultimatejobs"))
