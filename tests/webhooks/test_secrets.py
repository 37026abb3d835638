"""Secrets at rest: AES-GCM under UJOBS_SECRET_KEY, bound to their endpoint, key rotation."""

from __future__ import annotations

import base64
import os

import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.webhooks.errors import WebhookSecretInvalidError
from ujobs.webhooks.secrets import SecretBox


def key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def test_a_sealed_secret_opens_only_for_its_endpoint() -> None:
    box = SecretBox.parse(key())
    sealed = box.seal("whsec_abc", aad="ep_1")
    assert "whsec_abc" not in sealed
    assert sealed.startswith("v1:k1:")
    assert box.open(sealed, aad="ep_1") == "whsec_abc"
    assert box.seal("whsec_abc", aad="ep_1") != sealed  # a fresh nonce every time
    with pytest.raises(WebhookSecretInvalidError) as moved:
        box.open(sealed, aad="ep_2")
    assert moved.value.meta == {"reason": "tampered", "key_id": "k1"}
    assert "whsec_abc" not in str(moved.value)


def test_rotation_seals_with_the_first_key_and_opens_with_any() -> None:
    old, new = key(), key()
    before = SecretBox.parse(f"old:{old}")
    sealed = before.seal("s", aad="ep")
    during = SecretBox.parse(f"new:{new},old:{old}")
    assert during.open(sealed, aad="ep") == "s"
    assert during.key_of(during.seal("s", aad="ep")) == "new"
    after = SecretBox.parse(f"new:{new}")
    with pytest.raises(WebhookSecretInvalidError) as gone:
        after.open(sealed, aad="ep")
    assert gone.value.meta == {"reason": "unknown-key", "key_id": "old"}


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "not base64!",
        base64.b64encode(b"short").decode(),
        f"a:{key()},{key()}",
        f"a:{key()},a:{key()}",
    ],
)
def test_a_bad_key_names_the_variable(value: str | None) -> None:
    with pytest.raises(ConfigInvalidError) as exc:
        SecretBox.parse(value)
    assert exc.value.meta == {"variable": "UJOBS_SECRET_KEY"}


def test_a_malformed_stored_value_is_refused_with_its_code() -> None:
    box = SecretBox.parse(key())
    for stored in ("plain", "v2:k1:AAAA", "v1:k1:***"):
        with pytest.raises(WebhookSecretInvalidError):
            box.open(stored, aad="ep")
