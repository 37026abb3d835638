"""An endpoint's own headers: what HTTP lets one be, and how their values rest (sealed).

An endpoint may carry headers of its own (``X-Api-Key: …``) sent with every delivery. A name
is an HTTP token (RFC 9110 ``tchar``) and a value holds no control character (CR, LF, NUL and
the rest; a tab is allowed): anything else cannot be put on the wire, so it is refused when the
endpoint is added (``X_WEBHOOK_ENDPOINT_INVALID``) and, for a row stored before this rule, when
a delivery is about to send it (a counted failure, toward ``disable_after``).

Values often are credentials, so they are sealed at rest with the endpoint's secret's box
(``ujobs.webhooks.secrets.SecretBox``, ``<endpoint id>/headers`` as associated data, so a sealed
value copied onto another row or column does not open), and the row's ``headers`` column keeps
each name mapped to ``""`` for listings. No message here quotes a value.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from typing import Any

import orjson

from ujobs.webhooks.errors import WebhookEndpointInvalidError
from ujobs.webhooks.secrets import SecretBox

TOKEN_CHARS = frozenset(string.ascii_letters + string.digits + "!#$%&'*+-.^_`|~")
MAX_HEADERS = 32
MAX_NAME_CHARS = 256
MAX_VALUE_CHARS = 8_192


def _forbidden(char: str) -> bool:
    code = ord(char)
    return (code < 0x20 and char != "\t") or code == 0x7F


def check_headers(headers: Mapping[Any, Any]) -> dict[str, str]:
    """``headers`` as a plain dict when every name is an HTTP token and no value holds a byte
    HTTP forbids; ``X_WEBHOOK_ENDPOINT_INVALID`` naming the header (never its value)."""
    if len(headers) > MAX_HEADERS:
        raise WebhookEndpointInvalidError(
            f"an endpoint carries at most {MAX_HEADERS} headers of its own",
            meta={"field": "headers"},
        )
    out: dict[str, str] = {}
    for name, value in headers.items():
        if not isinstance(name, str) or not isinstance(value, str):
            raise WebhookEndpointInvalidError(
                "headers map names to string values", meta={"field": "headers"}
            )
        shown = name[:64]
        if not name or len(name) > MAX_NAME_CHARS or not set(name) <= TOKEN_CHARS:
            raise WebhookEndpointInvalidError(
                f"header name {shown!r} is not an HTTP token (1 to {MAX_NAME_CHARS} letters, "
                "digits or !#$%&'*+-.^_`|~)",
                meta={"field": "headers", "header": shown, "reason": "name"},
            )
        if len(value) > MAX_VALUE_CHARS or any(_forbidden(c) for c in value):
            raise WebhookEndpointInvalidError(
                f"header {name!r}: a value is at most {MAX_VALUE_CHARS} characters with no "
                "control character (CR, LF, NUL, ...); the value is not shown",
                meta={"field": "headers", "header": name, "reason": "value"},
            )
        out[name] = value
    return out


def header_names(headers: Mapping[str, str]) -> str:
    """What the row's ``headers`` column holds beside the seal: each name mapped to ``""``."""
    return orjson.dumps(dict.fromkeys(headers, "")).decode()


def _aad(endpoint_id: str) -> str:
    return f"{endpoint_id}/headers"


def seal_headers(box: SecretBox, endpoint_id: str, headers: Mapping[str, str]) -> str | None:
    """The values sealed under the box's current key; None for no headers."""
    if not headers:
        return None
    return box.seal(orjson.dumps(dict(headers)).decode(), aad=_aad(endpoint_id))


def open_headers(
    box: SecretBox, endpoint_id: str, stored: str, sealed: str | None
) -> dict[str, str]:
    """The endpoint's headers with their values: opened from ``sealed``, or (a row from
    before ``0019_webhook_headers_sealed``, not sealed yet) read from ``stored`` as it is."""
    if sealed is None:
        found: dict[str, str] = orjson.loads(stored)
        return found
    opened: dict[str, str] = orjson.loads(box.open(sealed, aad=_aad(endpoint_id)))
    return opened
