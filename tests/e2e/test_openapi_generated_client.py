"""The OpenAPI document is read by code generators: its shapes are the ones they all understand
(every JSON body a named component, every ``allOf`` only ``$ref``s, each component titled by its
own name), openapi-python-client generates a client from it without a warning, and that client,
imported as a user would, enqueues a job on a live api and reads it back."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.live_api import live_api
from ujobs.services.api.openapi import openapi_document
from ujobs.services.runtime.app_loader import load_api

APP = "ujobs.services.example_app:api"
GENERATOR = Path(sys.executable).with_name("openapi-python-client")
METHODS = ("get", "put", "post", "delete", "patch")


def _document() -> dict[str, Any]:
    return openapi_document(load_api(APP))


def _json_bodies(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for path, item in doc["paths"].items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None:
                found.append((f"{method} {path} body", body["schema"]))
            for status, answer in op.get("responses", {}).items():
                content = answer.get("content", {}).get("application/json")
                if content is not None:
                    found.append((f"{method} {path} {status}", content["schema"]))
    return found


def _all_ofs(node: Any, where: str) -> list[tuple[str, dict[str, Any]]]:
    if isinstance(node, list):
        return [found for n, item in enumerate(node) for found in _all_ofs(item, f"{where}[{n}]")]
    if not isinstance(node, dict):
        return []
    here = [(where, node)] if "allOf" in node else []
    return here + [found for k, v in node.items() for found in _all_ofs(v, f"{where}/{k}")]


def test_every_json_body_is_a_named_component() -> None:
    inline = [where for where, schema in _json_bodies(_document()) if set(schema) != {"$ref"}]
    assert not inline, f"bodies without a name: {inline}"


def test_every_all_of_is_refs_alone() -> None:
    doc = _document()
    wrong = [
        where
        for where, node in _all_ofs(doc, "")
        if set(node) != {"allOf"} or any(set(part) != {"$ref"} for part in node["allOf"])
    ]
    assert not wrong, f"allOf with siblings or inline members: {wrong}"


def test_each_component_is_titled_by_its_own_name() -> None:
    schemas = _document()["components"]["schemas"]
    titled = {name: s.get("title", name) for name, s in schemas.items()}
    assert {name: t for name, t in titled.items() if t != name} == {}


@pytest.mark.slow
def test_a_generated_python_client_enqueues_and_reads_a_job(
    tmp_path: Path, pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import orjson

    (tmp_path / "openapi.json").write_bytes(orjson.dumps(_document()))
    (tmp_path / "config.yml").write_text(
        "post_hooks: []\npackage_name_override: ujobs_client\nproject_name_override: ujobs-client\n"
    )
    generated = subprocess.run(
        [
            str(GENERATOR),
            "generate",
            "--path",
            str(tmp_path / "openapi.json"),
            "--output-path",
            str(tmp_path / "ujobs_client"),
            "--config",
            str(tmp_path / "config.yml"),
            "--meta",
            "none",
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    said = generated.stdout + generated.stderr
    assert generated.returncode == 0, said
    assert "Warning" not in said, said
    assert "Unable to parse" not in said, said

    monkeypatch.syspath_prepend(str(tmp_path))
    client_module = importlib.import_module("ujobs_client")
    enqueue = importlib.import_module("ujobs_client.api.default.enqueue_onboard_org")
    show = importlib.import_module("ujobs_client.api.default.show_job")
    body_type = importlib.import_module("ujobs_client.models.enqueue_onboard_org_body")
    input_type = importlib.import_module("ujobs_client.models.input_onboard_org")

    with live_api(pg_dsn, app=APP, tenant="acme") as api:
        client = client_module.AuthenticatedClient(base_url=api.url, token=api.tenant_token)
        body = body_type.EnqueueOnboardOrgBody(input_=input_type.InputOnboardOrg(org_id="acme"))
        answer = enqueue.sync_detailed(client=client, body=body)
        assert answer.status_code == 202, answer.content
        queued = answer.parsed
        assert queued.deduped is False
        reader = client_module.AuthenticatedClient(base_url=api.url, token=api.token)
        shown = show.sync_detailed(job=queued.id, client=reader)
        assert shown.status_code == 200, shown.content
        assert (shown.parsed.id, shown.parsed.name) == (queued.id, "onboard_org")
