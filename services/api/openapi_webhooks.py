"""The webhook endpoint routes' entries of the api's OpenAPI document (``api.webhooks``).

Kept apart from ``api.openapi`` (the other paths) so neither file outgrows one screenful of
concerns; the operation builder is that module's, handed in, so every route reads alike.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ujobs.webhooks.endpoint_headers import MAX_HEADERS, MAX_VALUE_CHARS

Op = Callable[..., dict[str, Any]]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


MAX_DELIVERIES_PAGE_DOC = 1_000
"""``api_webhooks.MAX_DELIVERIES_PAGE``, repeated so this module imports no route module."""

_PAYLOAD = {
    "type": "string",
    "enum": ["envelope", "raw"],
    "description": 'what a delivery carries: "envelope" is the Standard Webhooks '
    '{"type": <topic>, "timestamp": <ISO 8601>, "data": <the published JSON>}, so the partner '
    "reads the topic (the default for an endpoint registered now on the standard scheme); "
    '"raw" is the published bytes as they are (every endpoint registered before the envelope, '
    "and the ultimate scheme, which names the topic in a header)",
}
_SCHEME = {"type": "string", "enum": ["standard", "ultimate"]}
_ENDPOINT = {
    "type": "object",
    "description": "an endpoint as an operator lists it: header names only, never a secret",
    "required": ["id", "tenant", "url", "scheme", "payload", "topics", "disabledAtMs"],
    "properties": {
        "id": {"type": "string"},
        "tenant": {"type": ["string", "null"]},
        "url": {"type": "string"},
        "scheme": _ref("WebhookScheme"),
        "payload": _ref("WebhookPayload"),
        "description": {"type": "string"},
        "headers": {"type": "array", "items": {"type": "string"}},
        "topics": {"type": "array", "items": {"type": "string"}},
        "ratePerS": {"type": ["number", "null"]},
        "disabledAtMs": {"type": ["integer", "null"]},
        "disabledReason": {"type": ["string", "null"]},
        "consecutiveFailures": {"type": "integer"},
        "rotating": {"type": "boolean"},
        "createdAtMs": {"type": "integer"},
    },
}
_SECRET = {
    "type": "object",
    "description": "the endpoint's id and its secret: shown in this answer only",
    "required": ["id", "secret"],
    "properties": {"id": {"type": "string"}, "secret": {"type": "string"}},
}
_DISABLED = {
    "type": "object",
    "required": ["id", "disabled"],
    "properties": {"id": {"type": "string"}, "disabled": {"type": "boolean"}},
}
_DELIVERY = {
    "type": "object",
    "required": ["endpointId", "eventId", "jobId", "attempt", "outcome", "atMs"],
    "properties": {
        "endpointId": {"type": "string"},
        "eventId": {"type": "string"},
        "jobId": {"type": "string"},
        "attempt": {"type": "integer"},
        "outcome": {"type": "string", "enum": ["delivered", "failed", "skipped"]},
        "status": {"type": ["integer", "null"]},
        "code": {"type": ["string", "null"]},
        "latencyMs": {"type": "integer"},
        "response": {"type": "string", "description": "the response body's first characters"},
        "atMs": {"type": "integer"},
    },
}
_ADD = {
    "type": "object",
    "required": ["url"],
    "properties": {
        "url": {"type": "string", "description": "https://… the partner receives on"},
        "topics": {"type": "array", "items": {"type": "string"}, "description": "default ['*']"},
        "scheme": _ref("WebhookScheme"),
        "payload": _ref("WebhookPayload"),
        "headers": {
            "type": "object",
            "maxProperties": MAX_HEADERS,
            "propertyNames": {"pattern": "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$", "maxLength": 256},
            "additionalProperties": {"type": "string", "maxLength": MAX_VALUE_CHARS},
            "description": "sent with every delivery; values sealed at rest, never listed; no "
            "control character but a tab in a value",
        },
        "description": {"type": "string"},
        "ratePerS": {"type": "number", "exclusiveMinimum": 0},
        "tenantId": {"type": "string", "description": "operator tokens only; a tenant's own"},
        "id": {"type": "string", "description": "default ep_<new id>"},
    },
}
_ROTATE = {
    "type": "object",
    "properties": {
        "graceHours": {
            "type": "number",
            "minimum": 0,
            "maximum": 720,
            "description": "hours the old secret keeps signing beside the new one (24)",
        }
    },
}


WEBHOOK_SCHEMAS: dict[str, Any] = {
    "WebhookScheme": _SCHEME,
    "WebhookPayload": _PAYLOAD,
    "WebhookEndpoint": _ENDPOINT,
    "WebhookEndpointRegistration": _ADD,
    "WebhookEndpoints": {
        "type": "object",
        "required": ["endpoints"],
        "properties": {"endpoints": {"type": "array", "items": _ref("WebhookEndpoint")}},
    },
    "WebhookSecret": _SECRET,
}
"""The webhook routes' bodies, by name (``components.schemas``)."""


def webhook_paths(op: Op, path_param: Callable[[str, str], dict[str, Any]]) -> dict[str, Any]:
    endpoint = path_param("endpoint", "the endpoint's id")
    moved = ("200", "the endpoint's new state", _DISABLED)
    deliveries_query = [
        {"name": "failed", "in": "query", "schema": {"type": "string", "enum": ["true", "false"]}},
        {
            "name": "limit",
            "in": "query",
            "schema": {"type": "integer", "minimum": 1, "maximum": MAX_DELIVERIES_PAGE_DOC},
        },
    ]
    return {
        "/v1/webhooks/endpoints": {
            "get": op(
                "list_webhook_endpoints",
                "Webhook endpoints, never a secret; a tenant token sees its tenant's only",
                ("200", "the endpoints", _ref("WebhookEndpoints")),
                ("400", "403"),
                params=[{"name": "tenantId", "in": "query", "schema": {"type": "string"}}],
            ),
            "post": op(
                "add_webhook_endpoint",
                "Register an endpoint; answers its secret, this once",
                ("201", "created", _ref("WebhookSecret")),
                ("400", "403", "413"),
                body=_ref("WebhookEndpointRegistration"),
            ),
        },
        "/v1/webhooks/endpoints/{endpoint}/disable": {
            "parameters": [endpoint],
            "post": op(
                "disable_webhook_endpoint",
                "Stop deliveries to an endpoint; its events are kept for a redeliver",
                moved,
                ("403", "404"),
            ),
        },
        "/v1/webhooks/endpoints/{endpoint}/enable": {
            "parameters": [endpoint],
            "post": op(
                "enable_webhook_endpoint",
                "Deliver to an endpoint again",
                moved,
                ("403", "404"),
            ),
        },
        "/v1/webhooks/endpoints/{endpoint}/rotate-secret": {
            "parameters": [endpoint],
            "post": op(
                "rotate_webhook_secret",
                "A new secret (answered this once); the old one signs beside it for graceHours",
                ("200", "the new secret", _ref("WebhookSecret")),
                ("400", "403", "404", "413"),
                body=_ROTATE,
                body_required=False,
            ),
        },
        "/v1/webhooks/endpoints/{endpoint}/deliveries": {
            "parameters": [endpoint],
            "get": op(
                "list_webhook_deliveries",
                "An endpoint's delivery attempts, newest first",
                (
                    "200",
                    "the attempts",
                    {
                        "type": "object",
                        "required": ["deliveries"],
                        "properties": {"deliveries": {"type": "array", "items": _DELIVERY}},
                    },
                ),
                ("400", "403", "404"),
                params=deliveries_query,
            ),
        },
    }


__all__ = ["WEBHOOK_SCHEMAS", "webhook_paths"]
