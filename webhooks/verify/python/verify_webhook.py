"""Verify an ultimate-jobs webhook in your Python receiver. Copy this one file; it needs only
the standard library (and `cryptography` for v1a ed25519 signatures).

    from verify_webhook import InvalidWebhook, verify_standard

    try:
        verify_standard(SECRET, request.headers, raw_body)  # the bytes as received
    except InvalidWebhook:
        return 401
    event = read_event(request.headers, raw_body)  # after verifying, never before
    if event.topic == "orders.paid":
        ...  # event.data is what the app published

Run it over the published vectors: ``python verify_webhook.py ../vectors.json``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

TOLERANCE_S = 300


class InvalidWebhook(Exception):
    """The delivery does not verify: do not process it (answer 401)."""


def _as_list(secrets: str | Sequence[str]) -> list[str]:
    return [secrets] if isinstance(secrets, str) else list(secrets)


def _headers(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _need(headers: dict[str, str], name: str) -> str:
    value = headers.get(name)
    if not value:
        raise InvalidWebhook(f"missing {name} header")
    return value


def _fresh(timestamp: str, tolerance_s: int, now_s: int | None) -> int:
    if not timestamp.isdigit():
        raise InvalidWebhook("bad timestamp")
    ts = int(timestamp)
    now = int(time.time()) if now_s is None else now_s
    if abs(now - ts) > tolerance_s:
        raise InvalidWebhook("timestamp outside the tolerance")
    return ts


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def verify_standard(
    secrets: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes | str,
    tolerance_s: int = TOLERANCE_S,
    now_s: int | None = None,
) -> None:
    """Standard Webhooks: ``whsec_`` secrets verify ``v1`` (HMAC-SHA256), ``whpk_`` public keys
    verify ``v1a`` (ed25519). Raises ``InvalidWebhook`` unless one signature matches."""
    found = _headers(headers)
    msg_id = _need(found, "webhook-id")
    ts = _fresh(_need(found, "webhook-timestamp"), tolerance_s, now_s)
    raw = body.encode() if isinstance(body, str) else body
    content = f"{msg_id}.{ts}.".encode() + raw
    for entry in _need(found, "webhook-signature").split(" "):
        version, _, value = entry.partition(",")
        given = _b64(value)
        for secret in _as_list(secrets):
            if version == "v1" and not secret.startswith(("whpk_", "whsk_")):
                key = _b64(secret.removeprefix("whsec_"))
                mac = hmac.new(key, content, hashlib.sha256).digest()
                if key and hmac.compare_digest(mac, given):
                    return
            if version == "v1a" and secret.startswith("whpk_") and _ed25519(secret, content, given):
                return
    raise InvalidWebhook("no signature matches")


def _ed25519(public_key: str, content: bytes, signature: bytes) -> bool:
    from cryptography.exceptions import InvalidSignature
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    raw = _b64(public_key.removeprefix("whpk_"))
    if len(raw) != 32:
        return False
    try:
        Ed25519PublicKey.from_public_bytes(raw).verify(signature, content)
    except InvalidSignature:
        return False
    return True


def verify_ultimate(
    secrets: str | Sequence[str],
    headers: Mapping[str, str],
    body: bytes | str,
    tolerance_s: int = TOLERANCE_S,
    now_s: int | None = None,
) -> None:
    """The x-ultimate-webhook-* scheme: ``t=<ts>,v1=<hex>`` over
    ``v1:<ts>:<id>:<topic>:<body>``, keyed by the secret's UTF-8 bytes."""
    found = _headers(headers)
    event_id = _need(found, "x-ultimate-webhook-id")
    topic = _need(found, "x-ultimate-webhook-topic")
    if ":" in event_id or ":" in topic:
        raise InvalidWebhook("':' in the id or the topic")
    parts = [p.partition("=") for p in _need(found, "x-ultimate-webhook-signature").split(",")]
    stamps = [v for k, _, v in parts if k == "t"]
    macs = [v.strip().lower() for k, _, v in parts if k == "v1"]
    if len(stamps) != 1 or not macs:
        raise InvalidWebhook("bad signature header")
    ts = _fresh(stamps[0], tolerance_s, now_s)
    raw = body.encode() if isinstance(body, str) else body
    content = f"v1:{ts}:{event_id}:{topic}:".encode() + raw
    for secret in _as_list(secrets):
        expected = hmac.new(secret.encode(), content, hashlib.sha256).hexdigest().encode()
        if any(hmac.compare_digest(expected, mac.encode()) for mac in macs):
            return
    raise InvalidWebhook("no signature matches")


@dataclass(frozen=True)
class Event:
    """A verified delivery, read: its id, its topic (None when the delivery does not name it:
    a ``raw`` standard-scheme body), when it was published (the envelope's ``timestamp``;
    None otherwise) and what the app published (parsed JSON; the text when it is not JSON)."""

    id: str
    topic: str | None
    timestamp: str | None
    data: Any


def read_event(headers: Mapping[str, str], body: bytes | str, payload: str = "envelope") -> Event:
    """Read a delivery you have verified. ``payload`` is what the endpoint was registered
    with: ``envelope`` (the default) is the Standard Webhooks ``{"type", "timestamp",
    "data"}``; ``raw`` is the published bytes as they are. The x-ultimate scheme names its
    topic in a header and always sends the published bytes."""
    found = _headers(headers)
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    if "x-ultimate-webhook-topic" in found:
        return Event(
            found.get("x-ultimate-webhook-id", ""),
            found["x-ultimate-webhook-topic"],
            None,
            _parsed(text),
        )
    event_id = found.get("webhook-id", "")
    if payload == "raw":
        return Event(event_id, None, None, _parsed(text))
    envelope = json.loads(text)
    if not isinstance(envelope, dict) or not isinstance(envelope.get("type"), str):
        raise InvalidWebhook('not an envelope: {"type", "timestamp", "data"} expected')
    return Event(event_id, envelope["type"], envelope.get("timestamp"), envelope.get("data"))


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _run_vectors(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        vectors = json.load(handle)
    failures = 0
    for scheme, verify in (("standard", verify_standard), ("ultimate", verify_ultimate)):
        for case in vectors[scheme]:
            try:
                secrets, headers, body = case["secrets"], case["headers"], case["body"]
                verify(secrets, headers, body, case["tolerance"], case["now"])
                valid = True
            except InvalidWebhook:
                valid = False
            ok = valid == case["valid"]
            if ok and valid and "topic" in case:
                ok = read_event(headers, body, case["payload"]).topic == case["topic"]
            failures += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {scheme}: {case['name']}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_run_vectors(sys.argv[1]))
