"""The OpenAPI document in the shapes code generators all read (openapi-typescript,
openapi-python-client, oapi-codegen): every JSON body a ``$ref`` to a named component, every
``allOf`` a list of ``$ref``s and nothing beside it, every component titled by its own name.

The route modules describe bodies where they are clearest, inline beside their route; this
pass, run last on the whole document, gives each inline body a name from its operation and
splits an ``allOf`` with siblings into one more named part. Generators name their types after
components (or after a schema's ``title``: two job inputs both titled ``Input`` by pydantic
became one model), so a body with a name is a type a user can import, and an ``allOf`` with
siblings, which each generator merges its own way, never reaches them.
"""

from __future__ import annotations

import copy
import re
from typing import Any

METHODS = ("get", "put", "post", "delete", "patch")

__all__ = ["named_shapes"]


def named_shapes(document: dict[str, Any]) -> dict[str, Any]:
    """``document`` with its bodies named and its ``allOf``s split (a copy; the input is not
    changed)."""
    doc = copy.deepcopy(document)
    schemas: dict[str, Any] = doc.setdefault("components", {}).setdefault("schemas", {})
    for path, item in doc.get("paths", {}).items():
        for method in METHODS:
            op = item.get(method)
            if op is None:
                continue
            base = _type_name(op.get("operationId") or f"{method} {path}")
            body = op.get("requestBody", {}).get("content", {}).get("application/json")
            if body is not None and "$ref" not in body.get("schema", {"$ref": ""}):
                body["schema"] = _named(schemas, f"{base}Body", body["schema"])
            for status, answer in op.get("responses", {}).items():
                content = answer.get("content", {}).get("application/json")
                if content is not None and "$ref" not in content.get("schema", {"$ref": ""}):
                    suffix = "Answer" if status.startswith("2") else f"Answer{status}"
                    content["schema"] = _named(schemas, f"{base}{suffix}", content["schema"])
    for name in list(schemas):
        schemas[name] = _split_all_of(schemas, name, schemas[name])
        if "allOf" not in schemas[name]:
            schemas[name]["title"] = name
    return doc


def _type_name(text: str) -> str:
    """``enqueue_send_mail`` -> ``EnqueueSendMail``, ``post /v1/jobs/{job}`` -> ``PostV1JobsJob``
    (a type name from an operation)."""
    words = [w for w in re.split(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])", text) if w]
    return "".join(w[:1].upper() + w[1:] for w in words)


def _named(schemas: dict[str, Any], name: str, schema: dict[str, Any]) -> dict[str, str]:
    """``schema`` as the component ``name`` (a number added if the name is taken by another
    shape); answers the ``$ref`` to it."""
    candidate, n = name, 2
    while candidate in schemas and schemas[candidate] != schema:
        candidate, n = f"{name}{n}", n + 1
    schemas[candidate] = schema
    return {"$ref": f"#/components/schemas/{candidate}"}


def _split_all_of(schemas: dict[str, Any], name: str, schema: Any) -> Any:
    """``schema`` (and what it nests) with each ``allOf`` that has siblings turned into an
    ``allOf`` of ``$ref``s and nothing else: the siblings become the component
    ``<name>Fields`` (a description alone is dropped), and an inline member of the list a
    component of its own."""
    if isinstance(schema, list):
        return [_split_all_of(schemas, name, s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out = {k: _split_all_of(schemas, name, v) for k, v in schema.items()}
    parts = out.get("allOf")
    if not isinstance(parts, list):
        return out
    siblings = {k: v for k, v in out.items() if k not in ("allOf", "title")}
    refs: list[dict[str, Any]] = []
    for n, part in enumerate(parts, 1):
        refs.append(part if "$ref" in part else _named(schemas, f"{name}Part{n}", part))
    if set(siblings) - {"description"}:
        refs.append(_named(schemas, f"{name}Fields", {**siblings, "title": f"{name}Fields"}))
    # A description alone is no shape: a part holding only it would be a type of nothing,
    # which generators refuse; the parts carry their own.
    return {"allOf": refs}
