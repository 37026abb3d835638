"""The one signing module: what a delivery's signature is, for the sender and for a receiver.

Two schemes, chosen per endpoint; in both the exact bytes signed are the bytes sent.

* **Standard Webhooks** (the default, standardwebhooks.com): ``webhook-id``,
  ``webhook-timestamp`` and ``webhook-signature: v1,<base64 hmac-sha256>`` over
  ``<id>.<timestamp>.<body>``, keyed by the base64 part of a ``whsec_`` secret. Several
  signatures separated by spaces during a secret rotation; ``v1a,<base64 ed25519>`` for an
  endpoint holding a ``whsk_`` private key, verified with its ``whpk_`` public key.
* **Ultimate** (the spec's): ``x-ultimate-webhook-id``, ``x-ultimate-webhook-topic`` and
  ``x-ultimate-webhook-signature: t=<timestamp>,v1=<hex hmac-sha256>`` over
  ``v1:<timestamp>:<id>:<topic>:<body>``, keyed by the secret's UTF-8 bytes. ``:`` is refused
  in an id or a topic: one mac would otherwise authenticate two different id/topic splits.

The timestamp is inside the mac and is the SEND time, so a retry signs again now. Verifying
compares in constant time and refuses a timestamp more than ``tolerance_s`` in the past (a
replay) or in the future.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping, Sequence
from typing import Literal

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ujobs.webhooks.errors import (
    WebhookEventInvalidError,
    WebhookSecretInvalidError,
    WebhookSignatureInvalidError,
)

Scheme = Literal["standard", "ultimate"]
SCHEMES: tuple[Scheme, ...] = ("standard", "ultimate")
DEFAULT_TOLERANCE_S = 300

STANDARD_ID_HEADER = "webhook-id"
STANDARD_TIMESTAMP_HEADER = "webhook-timestamp"
STANDARD_SIGNATURE_HEADER = "webhook-signature"
ULTIMATE_ID_HEADER = "x-ultimate-webhook-id"
ULTIMATE_TOPIC_HEADER = "x-ultimate-webhook-topic"
ULTIMATE_SIGNATURE_HEADER = "x-ultimate-webhook-signature"
# Headers only the framework writes: an endpoint's own headers never override these.
FRAMEWORK_HEADERS = frozenset(
    {
        "content-type",
        STANDARD_ID_HEADER,
        STANDARD_TIMESTAMP_HEADER,
        STANDARD_SIGNATURE_HEADER,
        ULTIMATE_ID_HEADER,
        ULTIMATE_TOPIC_HEADER,
        ULTIMATE_SIGNATURE_HEADER,
    }
)

SECRET_PREFIX = "whsec_"
PRIVATE_KEY_PREFIX = "whsk_"
PUBLIC_KEY_PREFIX = "whpk_"

Secrets = str | Sequence[str]
Body = bytes | str


# --- keys ---------------------------------------------------------------------------------


def _b64decode(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise WebhookSecretInvalidError(
            f"the {what} is not valid base64 after its prefix", meta={"kind": what}
        ) from None


def hmac_key(secret: str) -> bytes:
    """The HMAC key of a Standard Webhooks secret: the base64 after ``whsec_`` (the prefix is
    optional, as the reference libraries have it)."""
    if not isinstance(secret, str) or not secret:
        raise WebhookSecretInvalidError("a webhook secret must be a non-empty string")
    raw = secret.removeprefix(SECRET_PREFIX)
    key = _b64decode(raw, "secret")
    if not key:
        raise WebhookSecretInvalidError("a webhook secret must not be empty after its prefix")
    return key


def _private_key(secret: str) -> Ed25519PrivateKey:
    raw = _b64decode(secret.removeprefix(PRIVATE_KEY_PREFIX), "private key")
    # 32 bytes is the seed; 64 is libsodium's seed || public key.
    if len(raw) not in (32, 64):
        raise WebhookSecretInvalidError(
            f"a whsk_ key holds 32 (or 64) bytes of ed25519 key, not {len(raw)}",
            meta={"kind": "private key"},
        )
    return Ed25519PrivateKey.from_private_bytes(raw[:32])


def _public_key(secret: str) -> Ed25519PublicKey:
    raw = _b64decode(secret.removeprefix(PUBLIC_KEY_PREFIX), "public key")
    if len(raw) != 32:
        raise WebhookSecretInvalidError(
            f"a whpk_ key holds 32 bytes of ed25519 public key, not {len(raw)}",
            meta={"kind": "public key"},
        )
    return Ed25519PublicKey.from_public_bytes(raw)


def generate_secret() -> str:
    """A fresh ``whsec_`` secret (24 random bytes, as the reference libraries make them)."""
    import secrets

    return SECRET_PREFIX + base64.b64encode(secrets.token_bytes(24)).decode()


def generate_keypair() -> tuple[str, str]:
    """A fresh ``(whsk_ private key, whpk_ public key)`` pair for ``v1a`` signatures."""
    from cryptography.hazmat.primitives import serialization

    key = Ed25519PrivateKey.generate()
    seed = key.private_bytes(
        serialization.Encoding.Raw,
        serialization.PrivateFormat.Raw,
        serialization.NoEncryption(),
    )
    public = key.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    return (
        PRIVATE_KEY_PREFIX + base64.b64encode(seed).decode(),
        PUBLIC_KEY_PREFIX + base64.b64encode(public).decode(),
    )


def public_key_of(private_key: str) -> str:
    """The ``whpk_`` public key a partner verifies ``v1a`` signatures with."""
    from cryptography.hazmat.primitives import serialization

    public = (
        _private_key(private_key)
        .public_key()
        .public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    )
    return PUBLIC_KEY_PREFIX + base64.b64encode(public).decode()


def _as_list(secrets: Secrets) -> list[str]:
    items = [secrets] if isinstance(secrets, str) else list(secrets)
    if not items:
        raise WebhookSecretInvalidError("at least one webhook secret is needed")
    return items


def _as_bytes(body: Body) -> bytes:
    return body.encode() if isinstance(body, str) else bytes(body)


def _timestamp(timestamp: int) -> int:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int) or timestamp < 0:
        raise WebhookEventInvalidError(
            f"a webhook timestamp is whole seconds since the epoch, got {timestamp!r}"
        )
    return timestamp


# --- Standard Webhooks ----------------------------------------------------------------------


def _check_msg_id(msg_id: str) -> str:
    # split() cuts at exactly the characters str.isspace() names: one piece is no whitespace.
    if not isinstance(msg_id, str) or msg_id.split() != [msg_id]:
        raise WebhookEventInvalidError(
            f"a webhook id must be a non-empty string without whitespace, got {msg_id!r}",
            meta={"field": "id"},
        )
    return msg_id


def standard_content(msg_id: str, timestamp: int, body: Body) -> bytes:
    """The bytes a Standard Webhooks signature covers: ``<id>.<timestamp>.<body>``."""
    prefix = f"{_check_msg_id(msg_id)}.{_timestamp(timestamp)}.".encode()
    return prefix + _as_bytes(body)


def _sign_one(secret: str, content: bytes) -> str:
    if secret.startswith(PRIVATE_KEY_PREFIX):
        return "v1a," + base64.b64encode(_private_key(secret).sign(content)).decode()
    if secret.startswith(PUBLIC_KEY_PREFIX):
        raise WebhookSecretInvalidError(
            "a whpk_ public key verifies v1a signatures; signing needs the whsk_ private key"
        )
    digest = hmac.new(hmac_key(secret), content, hashlib.sha256).digest()
    return "v1," + base64.b64encode(digest).decode()


def sign_standard(secrets: Secrets, msg_id: str, timestamp: int, body: Body) -> str:
    """The ``webhook-signature`` value: one ``v1,…`` (``whsec_``) or ``v1a,…`` (``whsk_``) per
    secret, space-separated (several during a rotation, the newest first)."""
    content = standard_content(msg_id, timestamp, body)
    return " ".join(_sign_one(secret, content) for secret in _as_list(secrets))


def standard_headers(secrets: Secrets, msg_id: str, timestamp: int, body: Body) -> dict[str, str]:
    """The three Standard Webhooks headers for one delivery."""
    return {
        STANDARD_ID_HEADER: msg_id,
        STANDARD_TIMESTAMP_HEADER: str(_timestamp(timestamp)),
        STANDARD_SIGNATURE_HEADER: sign_standard(secrets, msg_id, timestamp, body),
    }


def _lower(headers: Mapping[str, str]) -> dict[str, str]:
    return {k.lower(): v for k, v in headers.items()}


def _header(headers: dict[str, str], name: str) -> str:
    value = headers.get(name)
    if not value:
        raise WebhookSignatureInvalidError(
            f"the {name} header is missing", meta={"reason": "missing-header", "header": name}
        )
    return value


def _fresh(timestamp_text: str, tolerance_s: int, now_s: int | None) -> int:
    if not timestamp_text.isdigit():
        raise WebhookSignatureInvalidError(
            "the timestamp is not whole seconds since the epoch", meta={"reason": "malformed"}
        )
    ts = int(timestamp_text)
    now = int(time.time()) if now_s is None else now_s
    if now - ts > tolerance_s:
        raise WebhookSignatureInvalidError(
            f"the timestamp is {now - ts}s old, past the {tolerance_s}s tolerance (a replay?)",
            meta={"reason": "stale", "age_s": now - ts},
        )
    if ts - now > tolerance_s:
        raise WebhookSignatureInvalidError(
            f"the timestamp is {ts - now}s in the future, past the {tolerance_s}s tolerance",
            meta={"reason": "future", "ahead_s": ts - now},
        )
    return ts


def _mismatch() -> WebhookSignatureInvalidError:
    return WebhookSignatureInvalidError(
        "no signature matches this body under the given secret(s)", meta={"reason": "mismatch"}
    )


def _standard_matches(secret: str, content: bytes, version: str, value: str) -> bool:
    try:
        given = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    if version == "v1" and not secret.startswith((PUBLIC_KEY_PREFIX, PRIVATE_KEY_PREFIX)):
        expected = hmac.new(hmac_key(secret), content, hashlib.sha256).digest()
        return hmac.compare_digest(expected, given)
    if version == "v1a" and secret.startswith((PUBLIC_KEY_PREFIX, PRIVATE_KEY_PREFIX)):
        key = (
            _private_key(secret).public_key()
            if secret.startswith(PRIVATE_KEY_PREFIX)
            else _public_key(secret)
        )
        try:
            key.verify(given, content)
        except InvalidSignature:
            return False
        return True
    return False


def verify_standard(
    secrets: Secrets,
    headers: Mapping[str, str],
    body: Body,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    *,
    now_s: int | None = None,
) -> None:
    """Raise ``X_WEBHOOK_SIGNATURE_INVALID`` unless one signature in ``webhook-signature``
    verifies ``body`` under one of ``secrets`` (``whsec_`` for ``v1``, ``whpk_`` for ``v1a``)
    and the timestamp is within ``tolerance_s`` of now. Header names are case-insensitive."""
    keys = _as_list(secrets)
    found = _lower(headers)
    msg_id = _header(found, STANDARD_ID_HEADER)
    ts = _fresh(_header(found, STANDARD_TIMESTAMP_HEADER), tolerance_s, now_s)
    signatures = _header(found, STANDARD_SIGNATURE_HEADER)
    try:
        content = standard_content(msg_id, ts, body)
    except WebhookEventInvalidError:
        raise WebhookSignatureInvalidError(
            "the webhook-id header is malformed", meta={"reason": "malformed"}
        ) from None
    for entry in signatures.split(" "):
        version, sep, value = entry.partition(",")
        if not sep:
            continue
        for secret in keys:
            if _standard_matches(secret, content, version, value):
                return
    raise _mismatch()


# --- the spec's scheme ----------------------------------------------------------------------


def _check_label(value: str, field: str) -> str:
    if not isinstance(value, str) or not value:
        raise WebhookEventInvalidError(
            f"a webhook {field} must be a non-empty string", meta={"field": field}
        )
    if ":" in value:
        raise WebhookEventInvalidError(
            f"a webhook {field} must not contain ':' (one mac would authenticate two different "
            f"id/topic splits); got {value!r}",
            meta={"field": field},
        )
    return value


def ultimate_content(event_id: str, topic: str, timestamp: int, body: Body) -> bytes:
    """The bytes the spec's signature covers: ``v1:<timestamp>:<id>:<topic>:<body>``."""
    head = (
        f"v1:{_timestamp(timestamp)}:{_check_label(event_id, 'id')}:{_check_label(topic, 'topic')}:"
    )
    return head.encode() + _as_bytes(body)


def _ultimate_mac(secret: str, content: bytes) -> str:
    if not isinstance(secret, str) or not secret:
        raise WebhookSecretInvalidError("a webhook secret must be a non-empty string")
    return hmac.new(secret.encode(), content, hashlib.sha256).hexdigest()


def sign_ultimate(secrets: Secrets, event_id: str, topic: str, timestamp: int, body: Body) -> str:
    """The ``x-ultimate-webhook-signature`` value: ``t=<ts>,v1=<hex>`` (one ``v1=`` per secret
    during a rotation, the newest first)."""
    content = ultimate_content(event_id, topic, timestamp, body)
    macs = ",".join(f"v1={_ultimate_mac(secret, content)}" for secret in _as_list(secrets))
    return f"t={timestamp},{macs}"


def ultimate_headers(
    secrets: Secrets, event_id: str, topic: str, timestamp: int, body: Body
) -> dict[str, str]:
    """The three ``x-ultimate-webhook-*`` headers for one delivery."""
    return {
        ULTIMATE_ID_HEADER: event_id,
        ULTIMATE_TOPIC_HEADER: topic,
        ULTIMATE_SIGNATURE_HEADER: sign_ultimate(secrets, event_id, topic, timestamp, body),
    }


def verify_ultimate(
    secrets: Secrets,
    headers: Mapping[str, str],
    body: Body,
    tolerance_s: int = DEFAULT_TOLERANCE_S,
    *,
    now_s: int | None = None,
) -> None:
    """Raise ``X_WEBHOOK_SIGNATURE_INVALID`` unless the ``x-ultimate-webhook-*`` headers verify
    ``body`` under one of ``secrets`` within ``tolerance_s`` of now."""
    keys = _as_list(secrets)
    found = _lower(headers)
    event_id = _header(found, ULTIMATE_ID_HEADER)
    topic = _header(found, ULTIMATE_TOPIC_HEADER)
    parts = [p.partition("=") for p in _header(found, ULTIMATE_SIGNATURE_HEADER).split(",")]
    stamps = [v for k, _, v in parts if k == "t"]
    macs = [v for k, _, v in parts if k == "v1"]
    if len(stamps) != 1 or not macs:
        raise WebhookSignatureInvalidError(
            "the signature header must be t=<seconds>,v1=<hex>", meta={"reason": "malformed"}
        )
    ts = _fresh(stamps[0], tolerance_s, now_s)
    try:
        content = ultimate_content(event_id, topic, ts, body)
    except WebhookEventInvalidError:
        raise WebhookSignatureInvalidError(
            "the id or topic header is malformed", meta={"reason": "malformed"}
        ) from None
    for secret in keys:
        expected = _ultimate_mac(secret, content).encode()
        for mac in macs:
            if hmac.compare_digest(expected, mac.strip().lower().encode()):
                return
    raise _mismatch()


def delivery_headers(
    scheme: Scheme,
    secrets: Secrets,
    *,
    event_id: str,
    topic: str,
    timestamp: int,
    body: Body,
) -> dict[str, str]:
    """The signature headers an endpoint of ``scheme`` receives (``content-type`` aside)."""
    if scheme == "ultimate":
        return ultimate_headers(secrets, event_id, topic, timestamp, body)
    return standard_headers(secrets, event_id, timestamp, body)
