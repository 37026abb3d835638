"""What a delivery's body is: the Standard Webhooks envelope, or the published bytes as they are.

``envelope`` (the default for an endpoint registered now) follows the Standard Webhooks
payload convention so a partner tells topics apart from the body alone::

    {"type": "orders.paid", "timestamp": "2026-12-06T02:43:04.123Z", "data": {...}}

``type`` is the event's topic, ``timestamp`` when it was published (UTC, milliseconds), and
``data`` the published JSON itself, byte for byte (a body that is text but not JSON is carried
as a JSON string). ``raw`` sends the published bytes unchanged: what every endpoint registered
before the envelope received, and what they keep. The envelope is built from the event alone
(its topic, its publish time, its bytes), so every attempt of the built-in families sends the
same body whatever its send time; only the signature headers carry the send time. An ``Event``
of your own family without ``published_at_ms`` is stamped with the attempt's time instead.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal

import orjson

from ujobs.webhooks.errors import WebhookEndpointInvalidError, WebhookEventInvalidError

Payload = Literal["envelope", "raw"]
PAYLOADS: tuple[Payload, ...] = ("envelope", "raw")
JSON = "application/json"


def iso_ms(at_ms: int) -> str:
    """``at_ms`` as ISO 8601 in UTC with milliseconds: ``2026-12-06T02:43:04.123Z``."""
    at = datetime.fromtimestamp(at_ms / 1000, tz=UTC)
    return at.strftime("%Y-%m-%dT%H:%M:%S.") + f"{at_ms % 1000:03d}Z"


def delivery_body(
    payload: Payload,
    *,
    topic: str,
    event_id: str,
    published_at_ms: int,
    body: bytes,
    content_type: str,
) -> tuple[bytes, str]:
    """The bytes an endpoint of ``payload`` is sent for one event, and their content type."""
    if payload == "raw":
        return body, content_type
    try:
        orjson.loads(body)
        data = body
    except orjson.JSONDecodeError:
        try:
            data = orjson.dumps(body.decode("utf-8"))
        except UnicodeDecodeError:
            raise WebhookEventInvalidError(
                f"event {event_id!r} is not text, so no envelope can carry it; register the "
                'endpoint with payload "raw" to receive its bytes as they are',
                meta={"event_id": event_id, "field": "payload"},
            ) from None
    head = orjson.dumps({"type": topic, "timestamp": iso_ms(published_at_ms)})
    return head[:-1] + b',"data":' + data + b"}", JSON


def check_payload(value: object) -> Payload:
    """``value`` as a ``Payload``, else ``X_WEBHOOK_ENDPOINT_INVALID`` naming the two."""
    for payload in PAYLOADS:
        if value == payload:
            return payload
    raise WebhookEndpointInvalidError(
        f'payload is "envelope" (the Standard Webhooks {{"type", "timestamp", "data"}}) or '
        f'"raw" (the published bytes as they are), got {value!r}',
        meta={"field": "payload"},
    )
