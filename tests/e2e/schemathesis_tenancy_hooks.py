"""schemathesis hooks for ``test_api_schemathesis_tenancy.py`` (loaded by the CLI through
``SCHEMATHESIS_HOOKS``): tenant A's planted ids and strings are read from the JSON file
``UJOBS_FUZZ_PLANTED`` names (``tests.chaos.tenants.Planted.document``), and the fuzz runs
with tenant B's token.

* Generation: a path's ``{job}`` / ``{endpoint}`` / ``{id}`` is sometimes one of A's ids, a
  ``tenantId`` query sometimes A's tenant, and an enqueue's ``org_id`` sometimes B's own tenant
  (else nearly every enqueue is a 403 and the stateful links start nowhere), sometimes with
  A's readable ``runId`` (``order-42-…``).
* Checks: ``no_x_internal`` (no body names ``X_INTERNAL``: the unhandled path) and
  ``nothing_of_another_tenant`` (no body holds one of A's strings that the request did not
  carry: an echo of what B sent is no leak).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import schemathesis
from hypothesis import strategies as st

PLANTED: dict[str, Any] = json.loads(Path(os.environ["UJOBS_FUZZ_PLANTED"]).read_text())
FOREIGN_IDS: list[str] = PLANTED["jobIds"] + PLANTED["endpointIds"]
ID_PARAMETERS = ("job", "endpoint", "id")


def _sent(response: Any) -> str:
    request = response.request
    body = request.body or b""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    return f"{request.url}\n{text}"


@schemathesis.check
def no_x_internal(ctx: Any, response: Any, case: Any) -> bool | None:
    if b"X_INTERNAL" in response.content:
        raise AssertionError(f"an answer names X_INTERNAL: {response.content[:300]!r}")
    return None


@schemathesis.check
def nothing_of_another_tenant(ctx: Any, response: Any, case: Any) -> bool | None:
    text = response.content.decode("utf-8", "replace")
    sent = _sent(response)
    leaked = [s for s in PLANTED["strings"] if s in text and s not in sent]
    if leaked:
        raise AssertionError(f"tenant B's answer holds tenant A's {leaked}: {text[:300]}")
    return None


@schemathesis.hook
def flatmap_path_parameters(ctx: Any, path_parameters: dict[str, Any]) -> st.SearchStrategy[Any]:
    names = [name for name in ID_PARAMETERS if name in (path_parameters or {})]
    if not names:
        return st.just(path_parameters)
    foreign = [{**path_parameters, name: value} for name in names for value in FOREIGN_IDS]
    return st.one_of(st.just(path_parameters), st.sampled_from(foreign))


@schemathesis.hook
def flatmap_query(ctx: Any, query: dict[str, Any]) -> st.SearchStrategy[Any]:
    if not isinstance(query, dict) or "tenantId" not in query:
        return st.just(query)
    return st.sampled_from([query, {**query, "tenantId": PLANTED["tenantA"]}])


def _own(value: Any) -> Any:
    if isinstance(value, dict) and "org_id" in value:
        return {**value, "org_id": PLANTED["tenantB"]}
    return value


@schemathesis.hook
def flatmap_body(ctx: Any, body: Any) -> st.SearchStrategy[Any]:
    """An enqueue as generated, its input alone for B's own tenant (the optional fields
    generated beside it are mostly refused: the stateful links need 202s), and that under A's
    readable ``runId``; a batch as generated, or for B's own tenant."""
    if not isinstance(body, dict):
        return st.just(body)
    if isinstance(body.get("inputs"), list):
        return st.sampled_from([body, {"inputs": [_own(v) for v in body["inputs"]]}])
    if "input" not in body:
        return st.just(body)
    own = {"input": _own(body["input"])}
    shared = {**own, "runId": PLANTED["sharedRunId"]}
    return st.sampled_from([body, own, shared])
