"""The "Enqueue from any language" guide's snippets (docs/guides/http-enqueue.md), extracted
and run as a user would run them (curl, ``node enqueue.mjs``, ``java Enqueue.java``, ``go run
enqueue.go``) against a live ``ujobs api``, so the guide cannot drift from the API. Go is
skipped only where ``go`` is not installed (``.ci/run`` installs Debian's golang-go)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from tests.e2e.live_api import live_api
from tests.e2e.service_process import ROOT, service_env
from tests.support.docs import page

PAGE = "guides/http-enqueue.md"
# language -> (file name, command)
RUNNERS = {
    "sh": ("enqueue.sh", ["bash", "enqueue.sh"]),
    "js": ("enqueue.mjs", ["node", "enqueue.mjs"]),
    "java": ("Enqueue.java", ["java", "Enqueue.java"]),
    "go": ("enqueue.go", ["go", "run", "enqueue.go"]),
}


def snippets() -> dict[str, str]:
    found = dict(re.findall(r"^```(sh|js|java|go)\n(.*?)^```", page(PAGE), flags=re.M | re.S))
    return found


def test_the_section_has_a_snippet_per_language() -> None:
    assert set(snippets()) == set(RUNNERS)


def test_every_snippet_enqueues_through_a_live_api(pg_dsn: str, tmp_path: Path) -> None:
    found = snippets()
    languages = [lang for lang in RUNNERS if lang != "go" or shutil.which("go")]
    with live_api(pg_dsn, app="ujobs.services.example_app:api", tenant="acme") as api:
        env = {
            **os.environ,
            "UJOBS_URL": api.url,
            "UJOBS_TOKEN": api.tenant_token,
            "GOCACHE": str(tmp_path / "gocache"),
            "GOPATH": str(tmp_path / "gopath"),
            "GO111MODULE": "auto",
        }
        answers = {}
        for lang in languages:
            name, command = RUNNERS[lang]
            folder = tmp_path / lang
            folder.mkdir()
            (folder / name).write_text(found[lang])
            done = subprocess.run(
                command, cwd=folder, env=env, capture_output=True, text=True, timeout=300,
                check=False,
            )  # fmt: skip
            assert done.returncode == 0, f"{lang}: {done.stdout}\n{done.stderr}"
            answers[lang] = orjson.loads(done.stdout.strip().splitlines()[-1])
        # The same variables exported, the operator CLI asks that api (no DATABASE_URL): the
        # tenant token reads its job, an operator's lists the tokens.
        cli = [sys.executable, "-m", "ujobs.services.cli"]
        remote = service_env(UJOBS_URL=api.url, UJOBS_TOKEN=api.tenant_token)
        listed = subprocess.run(
            [*cli, "jobs", "list", "--json"], cwd=ROOT, env=remote, capture_output=True,
            text=True, timeout=120, check=False,
        )  # fmt: skip
        assert listed.returncode == 0, listed.stderr
        assert [j["id"] for j in orjson.loads(listed.stdout)["jobs"]] == [answers["sh"]["id"]]
        tokens = subprocess.run(
            [*cli, "tokens", "list"], cwd=ROOT, env={**remote, "UJOBS_TOKEN": api.token},
            capture_output=True, text=True, timeout=120, check=False,
        )  # fmt: skip
        assert tokens.returncode == 0, tokens.stderr
        assert "live-api" in tokens.stdout
    first = answers["sh"]
    assert set(first) == {"id", "runId", "deduped"}
    assert first["deduped"] is False
    # Every later client met the live run of the same key: one job, whatever the language.
    for lang in languages[1:]:
        assert answers[lang] == {**first, "deduped": True}, lang
    if "go" not in languages:
        pytest.skip("go is not installed: the Go snippet was not run")
