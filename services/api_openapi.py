"""The OpenAPI document of the api's routes (``GET /v1/openapi.json``).

Written out rather than generated: five routes do not need a framework, and a document a
person reads in review is the contract a client in another language codes against. A test
checks every route the app serves is in it and nothing else is.
"""

from __future__ import annotations

from typing import Any

from services.api_exports import export_paths

_ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message", "meta"],
            "properties": {
                "code": {"type": "string", "pattern": "^X_[A-Z0-9_]+$"},
                "message": {"type": "string"},
                "meta": {"type": "object"},
            },
        }
    },
}


def _json(description: str, schema: dict[str, Any]) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _error(description: str) -> dict[str, Any]:
    return _json(description, {"$ref": "#/components/schemas/Error"})


def openapi_document() -> dict[str, Any]:
    status = {"type": "object", "properties": {"status": {"type": "string"}}}
    return {
        "openapi": "3.1.0",
        "info": {"title": "ultimate-jobs api", "version": "1"},
        "paths": {
            "/healthz": {
                "get": {
                    "summary": "Liveness: the process is up",
                    "responses": {"200": _json("alive", status)},
                }
            },
            "/readyz": {
                "get": {
                    "summary": "Readiness: the database answers and the process is not draining",
                    "responses": {
                        "200": _json("ready", status),
                        "503": _error("draining (X_DRAINING) or the database is down"),
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (queue_depth, jobs_total, ...)",
                    "responses": {
                        "200": {
                            "description": "the exposition format",
                            "content": {"text/plain": {"schema": {"type": "string"}}},
                        }
                    },
                }
            },
            "/v1/manifest": {
                "get": {
                    "summary": "Every job and task descriptor, with each job's input JSON Schema",
                    "responses": {
                        "200": _json(
                            "the manifest",
                            {
                                "type": "object",
                                "required": ["jobs", "tasks"],
                                "properties": {
                                    "jobs": {"type": "array", "items": {"type": "object"}},
                                    "tasks": {"type": "array", "items": {"type": "object"}},
                                },
                            },
                        )
                    },
                }
            },
            "/v1/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})},
                }
            },
            **export_paths(_json, _error),
        },
        "components": {"schemas": {"Error": _ERROR}},
    }
