"""The partner kit's ``webhooks/verify/vectors.json``, built from ``ujobs.webhooks.signature``.

Every case is deterministic (HMAC and ed25519 both are), so the committed file is exactly what
this builds; ``test_partner_kit`` holds the two equal. Regenerate after a deliberate change:

    .venv/bin/python -m tests.webhooks.vectors_source > webhooks/verify/vectors.json
"""

from __future__ import annotations

import base64
import sys
from typing import Any

import orjson

from ujobs.webhooks.payload import delivery_body
from ujobs.webhooks.signature import (
    public_key_of,
    sign_standard,
    sign_ultimate,
    standard_headers,
    ultimate_headers,
)

# The Standard Webhooks specification's published vector.
REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
REF_TS = 1614265330
REF_BODY = '{"test": 2432232314}'
OTHER_SECRET = "whsec_" + base64.b64encode(b"another partner's secret!").decode()
PRIVATE_KEY = "whsk_" + base64.b64encode(bytes(range(32))).decode()
PUBLIC_KEY = public_key_of(PRIVATE_KEY)
TS = 1700000000
BODY = '{"type":"orders.paid","data":{"id":"ord_1","total":"12.50","note":"café ☕"}}'


PUBLISHED = '{"id":"ord_1","total":"12.50","note":"café ☕"}'
"""What the app published: the envelope's ``data``, and the whole body of a ``raw`` endpoint."""
ENVELOPE = delivery_body(
    "envelope",
    topic="orders.paid",
    event_id="evt_01HZ",
    published_at_ms=TS * 1000 - 1_500,
    body=PUBLISHED.encode(),
    content_type="application/json",
)[0].decode()


def case(
    name: str,
    secrets: list[str],
    headers: dict[str, str],
    body: str,
    now: int,
    valid: bool,
    tolerance: int = 300,
    read: tuple[str, str | None] | None = None,
) -> dict[str, Any]:
    """``read``: the endpoint's payload and the topic a receiver reads from the delivery
    (``readEvent`` in each kit language), for a case that shows a delivery's form."""
    out: dict[str, Any] = {
        "name": name,
        "secrets": secrets,
        "headers": headers,
        "body": body,
        "now": now,
        "tolerance": tolerance,
        "valid": valid,
    }
    if read is not None:
        out["payload"], out["topic"] = read
    return out


def standard_cases() -> list[dict[str, Any]]:
    ref = standard_headers(REF_SECRET, REF_ID, REF_TS, REF_BODY)
    ours = standard_headers(REF_SECRET, "evt_01HZ", TS, BODY)
    rotated = {
        **ours,
        "webhook-signature": sign_standard([OTHER_SECRET, REF_SECRET], "evt_01HZ", TS, BODY),
    }
    signed = standard_headers(PRIVATE_KEY, "evt_01HZ", TS, BODY)
    enveloped = standard_headers(REF_SECRET, "evt_01HZ", TS, ENVELOPE)
    raw = standard_headers(REF_SECRET, "evt_01HZ", TS, PUBLISHED)
    return [
        case("reference vector", [REF_SECRET], ref, REF_BODY, REF_TS, True),
        case(
            "reference vector, secret without prefix", [REF_SECRET[6:]], ref, REF_BODY, REF_TS, True
        ),
        case("reference vector, body changed", [REF_SECRET], ref, REF_BODY + " ", REF_TS, False),
        case("utf-8 body", [REF_SECRET], ours, BODY, TS, True),
        case(
            "header names in capitals",
            [REF_SECRET],
            {k.title(): v for k, v in ours.items()},
            BODY,
            TS,
            True,
        ),
        case("stale: 301 s old", [REF_SECRET], ours, BODY, TS + 301, False),
        case("fresh: 300 s old", [REF_SECRET], ours, BODY, TS + 300, True),
        case("future: 301 s ahead", [REF_SECRET], ours, BODY, TS - 301, False),
        case("wider tolerance", [REF_SECRET], ours, BODY, TS + 3600, True, tolerance=3600),
        case("wrong secret", [OTHER_SECRET], ours, BODY, TS, False),
        case("receiver holds two secrets", [OTHER_SECRET, REF_SECRET], ours, BODY, TS, True),
        case("rotation: two signatures, old secret", [REF_SECRET], rotated, BODY, TS, True),
        case("rotation: two signatures, new secret", [OTHER_SECRET], rotated, BODY, TS, True),
        case(
            "re-dated: timestamp changed after signing",
            [REF_SECRET],
            {**ours, "webhook-timestamp": str(TS + 60)},
            BODY,
            TS + 60,
            False,
        ),
        case(
            "another id under the same signature",
            [REF_SECRET],
            {**ours, "webhook-id": "evt_01HY"},
            BODY,
            TS,
            False,
        ),
        case(
            "missing signature header",
            [REF_SECRET],
            {k: v for k, v in ours.items() if k != "webhook-signature"},
            BODY,
            TS,
            False,
        ),
        case("v1a ed25519", [PUBLIC_KEY], signed, BODY, TS, True),
        case(
            "v1a ed25519, body changed",
            [PUBLIC_KEY],
            signed,
            BODY.replace("12.50", "1250"),
            TS,
            False,
        ),
        case("v1a signature, hmac secret", [REF_SECRET], signed, BODY, TS, False),
        case("v1 signature, public key", [PUBLIC_KEY], ours, BODY, TS, False),
        case(
            "envelope: the topic is the body's type",
            [REF_SECRET],
            enveloped,
            ENVELOPE,
            TS,
            True,
            read=("envelope", "orders.paid"),
        ),
        case(
            "envelope, data changed",
            [REF_SECRET],
            enveloped,
            ENVELOPE.replace("12.50", "1250"),
            TS,
            False,
        ),
        case(
            "raw: the published bytes, no topic in them",
            [REF_SECRET],
            raw,
            PUBLISHED,
            TS,
            True,
            read=("raw", None),
        ),
    ]


def ultimate_cases() -> list[dict[str, Any]]:
    secret = "partner-secret-1"
    ours = ultimate_headers(secret, "evt_01HZ", "orders.paid", TS, BODY)
    rotated = {
        **ours,
        "x-ultimate-webhook-signature": sign_ultimate(
            ["partner-secret-2", secret], "evt_01HZ", "orders.paid", TS, BODY
        ),
    }
    return [
        case("signed", [secret], ours, BODY, TS, True, read=("raw", "orders.paid")),
        case("body changed", [secret], ours, BODY + "\n", TS, False),
        case(
            "topic relabelled",
            [secret],
            {**ours, "x-ultimate-webhook-topic": "orders.refunded"},
            BODY,
            TS,
            False,
        ),
        case("stale: 301 s old", [secret], ours, BODY, TS + 301, False),
        case("future: 301 s ahead", [secret], ours, BODY, TS - 301, False),
        case("wrong secret", ["partner-secret-2"], ours, BODY, TS, False),
        case("rotation: old secret", [secret], rotated, BODY, TS, True),
        case("rotation: new secret", ["partner-secret-2"], rotated, BODY, TS, True),
        case(
            "re-dated",
            [secret],
            {
                **ours,
                "x-ultimate-webhook-signature": ours["x-ultimate-webhook-signature"].replace(
                    f"t={TS}", f"t={TS + 60}"
                ),
            },
            BODY,
            TS + 60,
            False,
        ),
    ]


def vectors() -> dict[str, Any]:
    return {
        "about": (
            "Test vectors for receivers of ultimate-jobs webhooks. Each case: verify `body` "
            "(UTF-8) with `headers` under any of `secrets` at unix time `now` with `tolerance` "
            "seconds; `valid` is the expected answer. `standard` cases use the Standard "
            "Webhooks headers (v1 HMAC with whsec_ secrets, v1a ed25519 with whpk_ keys); "
            "`ultimate` cases use the x-ultimate-webhook-* headers. A case with `payload` and "
            "`topic` shows a delivery's form: read with the endpoint's `payload` (`envelope`: "
            'the Standard Webhooks {"type", "timestamp", "data"}; `raw`: the published bytes), '
            "a receiver finds `topic` (the envelope's `type`, the x-ultimate-webhook-topic "
            "header, or none in a raw standard body)."
        ),
        "standard": standard_cases(),
        "ultimate": ultimate_cases(),
    }


def render() -> bytes:
    return orjson.dumps(vectors(), option=orjson.OPT_INDENT_2) + b"\n"


if __name__ == "__main__":
    sys.stdout.buffer.write(render())
