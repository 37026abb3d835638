"""ujobs.webhooks.signature: the Standard Webhooks reference vector, rotation, v1a, freshness, and
the spec's scheme with its ':' rule."""

from __future__ import annotations

import base64

import pytest

from ujobs.webhooks.errors import (
    WebhookEventInvalidError,
    WebhookSecretInvalidError,
    WebhookSignatureInvalidError,
)
from ujobs.webhooks.signature import (
    generate_keypair,
    generate_secret,
    public_key_of,
    sign_standard,
    sign_ultimate,
    standard_headers,
    ultimate_content,
    ultimate_headers,
    verify_standard,
    verify_ultimate,
)

# The Standard Webhooks specification's published test vector (its reference libraries all
# reproduce it): a verifier that accepts ours accepts theirs.
REF_SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
REF_ID = "msg_p5jXN8AQM9LWM0D4loKWxJek"
REF_TS = 1614265330
REF_BODY = '{"test": 2432232314}'
REF_SIGNATURE = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="


def ref_headers(signature: str = REF_SIGNATURE, ts: int = REF_TS) -> dict[str, str]:
    return {"webhook-id": REF_ID, "webhook-timestamp": str(ts), "webhook-signature": signature}


def reason(exc: pytest.ExceptionInfo[WebhookSignatureInvalidError]) -> str:
    value = exc.value.meta["reason"]
    assert isinstance(value, str)
    return value


def test_the_reference_vector_signs_exactly() -> None:
    assert sign_standard(REF_SECRET, REF_ID, REF_TS, REF_BODY) == REF_SIGNATURE
    # The prefix is optional, as in the reference libraries; bytes and str sign alike.
    assert sign_standard(REF_SECRET[6:], REF_ID, REF_TS, REF_BODY.encode()) == REF_SIGNATURE


def test_the_reference_vector_verifies_and_header_names_are_case_insensitive() -> None:
    verify_standard(REF_SECRET, ref_headers(), REF_BODY, now_s=REF_TS)
    upper = {k.upper(): v for k, v in ref_headers().items()}
    verify_standard(REF_SECRET, upper, REF_BODY.encode(), now_s=REF_TS + 299)


def test_a_tampered_body_id_or_signature_is_refused() -> None:
    with pytest.raises(WebhookSignatureInvalidError) as body:
        verify_standard(REF_SECRET, ref_headers(), '{"test": 2432232315}', now_s=REF_TS)
    assert reason(body) == "mismatch"
    other_id = {**ref_headers(), "webhook-id": "msg_other"}
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(REF_SECRET, other_id, REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(REF_SECRET, ref_headers("v1,bm9wZQ=="), REF_BODY, now_s=REF_TS)
    # A signature of the right value under another version is not accepted.
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(REF_SECRET, ref_headers("v2" + REF_SIGNATURE[2:]), REF_BODY, now_s=REF_TS)


def test_a_stale_or_future_timestamp_is_refused_inside_the_mac() -> None:
    with pytest.raises(WebhookSignatureInvalidError) as stale:
        verify_standard(REF_SECRET, ref_headers(), REF_BODY, now_s=REF_TS + 301)
    assert reason(stale) == "stale"
    with pytest.raises(WebhookSignatureInvalidError) as future:
        verify_standard(REF_SECRET, ref_headers(), REF_BODY, now_s=REF_TS - 301)
    assert reason(future) == "future"
    # Re-dating a captured delivery into the window breaks the mac.
    with pytest.raises(WebhookSignatureInvalidError) as redated:
        verify_standard(REF_SECRET, ref_headers(ts=REF_TS + 1000), REF_BODY, now_s=REF_TS + 1000)
    assert reason(redated) == "mismatch"
    verify_standard(REF_SECRET, ref_headers(), REF_BODY, tolerance_s=10_000, now_s=REF_TS + 5000)


def test_missing_and_malformed_headers_name_themselves() -> None:
    for header in ("webhook-id", "webhook-timestamp", "webhook-signature"):
        partial = {k: v for k, v in ref_headers().items() if k != header}
        with pytest.raises(WebhookSignatureInvalidError) as exc:
            verify_standard(REF_SECRET, partial, REF_BODY, now_s=REF_TS)
        assert exc.value.meta == {"reason": "missing-header", "header": header}
    with pytest.raises(WebhookSignatureInvalidError) as bad_ts:
        verify_standard(REF_SECRET, ref_headers(ts=-5), REF_BODY, now_s=REF_TS)
    assert reason(bad_ts) == "malformed"


def test_rotation_signs_with_every_secret_and_either_verifies() -> None:
    new = generate_secret()
    header = sign_standard([new, REF_SECRET], REF_ID, REF_TS, REF_BODY)
    first, second = header.split(" ")
    assert second == REF_SIGNATURE
    assert first != REF_SIGNATURE
    for secret in (new, REF_SECRET):
        verify_standard(secret, ref_headers(header), REF_BODY, now_s=REF_TS)
    # A receiver holding both during its own rotation accepts a single signature.
    verify_standard([new, REF_SECRET], ref_headers(), REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(generate_secret(), ref_headers(header), REF_BODY, now_s=REF_TS)


def test_v1a_ed25519_signs_with_the_private_key_and_verifies_with_the_public_one() -> None:
    private, public = generate_keypair()
    assert public_key_of(private) == public
    headers = standard_headers(private, REF_ID, REF_TS, REF_BODY)
    assert headers["webhook-signature"].startswith("v1a,")
    assert len(base64.b64decode(headers["webhook-signature"][4:])) == 64
    verify_standard(public, headers, REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(public, headers, REF_BODY + " ", now_s=REF_TS)
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(generate_keypair()[1], headers, REF_BODY, now_s=REF_TS)
    # An HMAC secret never accepts a v1a signature, nor a public key a v1 one.
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(REF_SECRET, headers, REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSignatureInvalidError):
        verify_standard(public, ref_headers(), REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSecretInvalidError):
        sign_standard(public, REF_ID, REF_TS, REF_BODY)


def test_bad_secrets_are_refused_with_their_code() -> None:
    for secret in ("", "whsec_not base64!", "whsk_AAAA"):
        with pytest.raises(WebhookSecretInvalidError):
            sign_standard(secret, REF_ID, REF_TS, REF_BODY)
    with pytest.raises(WebhookSecretInvalidError):
        verify_standard("whpk_AAAA", ref_headers("v1a,AAAA"), REF_BODY, now_s=REF_TS)
    with pytest.raises(WebhookSecretInvalidError):
        sign_standard([], REF_ID, REF_TS, REF_BODY)


def test_ultimate_scheme_signs_the_canonical_string_in_hex() -> None:
    assert ultimate_content("evt_01HZ", "orders.paid", 1700000000, b"{}") == (
        b"v1:1700000000:evt_01HZ:orders.paid:{}"
    )
    headers = ultimate_headers("s3cret", "evt_01HZ", "orders.paid", 1700000000, "{}")
    assert headers["x-ultimate-webhook-id"] == "evt_01HZ"
    assert headers["x-ultimate-webhook-topic"] == "orders.paid"
    # HMAC-SHA256("s3cret", "v1:1700000000:evt_01HZ:orders.paid:{}"), computed with openssl.
    assert headers["x-ultimate-webhook-signature"] == (
        "t=1700000000,v1=a8ae4550a6873a18bb36c72f54624bb7701dae6dd18d4eb44910eb817ded4f27"
    )
    verify_ultimate("s3cret", headers, "{}", now_s=1700000000)
    with pytest.raises(WebhookSignatureInvalidError) as stale:
        verify_ultimate("s3cret", headers, "{}", now_s=1700000301)
    assert reason(stale) == "stale"
    with pytest.raises(WebhookSignatureInvalidError):
        verify_ultimate("other", headers, "{}", now_s=1700000000)
    relabelled = {**headers, "x-ultimate-webhook-topic": "orders.refunded"}
    with pytest.raises(WebhookSignatureInvalidError):
        verify_ultimate("s3cret", relabelled, "{}", now_s=1700000000)


def test_ultimate_scheme_refuses_a_colon_in_an_id_or_a_topic() -> None:
    # 'evt:01HZ' + 'orders.paid' and 'evt' + '01HZ:orders.paid' would share one mac.
    with pytest.raises(WebhookEventInvalidError) as in_id:
        sign_ultimate("s", "evt:01HZ", "orders.paid", 1700000000, "{}")
    assert in_id.value.meta == {"field": "id"}
    with pytest.raises(WebhookEventInvalidError) as in_topic:
        sign_ultimate("s", "evt", "01HZ:orders.paid", 1700000000, "{}")
    assert in_topic.value.meta == {"field": "topic"}


def test_ultimate_rotation_carries_one_mac_per_secret() -> None:
    header = sign_ultimate(["new", "old"], "evt_1", "a.b", 1700000000, "{}")
    assert header.count("v1=") == 2
    headers = {
        "x-ultimate-webhook-id": "evt_1",
        "x-ultimate-webhook-topic": "a.b",
        "x-ultimate-webhook-signature": header,
    }
    verify_ultimate("old", headers, "{}", now_s=1700000000)
    verify_ultimate("new", headers, "{}", now_s=1700000000)
    malformed = {**headers, "x-ultimate-webhook-signature": "v1=abc"}
    with pytest.raises(WebhookSignatureInvalidError) as exc:
        verify_ultimate("old", malformed, "{}", now_s=1700000000)
    assert reason(exc) == "malformed"


@pytest.mark.parametrize(
    "msg_id", ["", " ", "evt 1", " evt_1", "evt_1\n", "evt\t1", "evt\u20031", "evt\x1c1", "\u3000"]
)
def test_a_standard_id_with_any_whitespace_or_none_at_all_is_refused(msg_id: str) -> None:
    with pytest.raises(WebhookEventInvalidError) as refused:
        sign_standard(REF_SECRET, msg_id, 1700000000, "{}")
    assert refused.value.meta == {"field": "id"}


def test_a_standard_id_of_any_other_characters_is_signed() -> None:
    for msg_id in ("evt_1", "évènement-1", "a.b:c/d", "\x00x"):
        assert sign_standard(REF_SECRET, msg_id, 1700000000, "{}").startswith("v1,")
