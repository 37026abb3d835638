"""Endpoint secrets at rest: AES-256-GCM under ``UJOBS_SECRET_KEY``.

A stored secret is ``v1:<key id>:<base64 nonce || ciphertext || tag>``; the endpoint's id is
the associated data, so a sealed secret copied onto another endpoint's row does not open.

``UJOBS_SECRET_KEY`` is one base64 key of 32 bytes (its id is ``k1``), or a comma-separated
list ``id:base64key,...``: the FIRST key seals, every key opens. Rotating the key is: put the
new key first and keep the old one after it, run ``ujobs webhooks reseal`` (every secret is
opened and sealed again under the first key), then drop the old key.

A secret never reaches a log, an error message or a step output: errors here name the key id
and the endpoint, never the text.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Sequence

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ujobs.errors import ConfigInvalidError
from ujobs.webhooks.errors import WebhookSecretInvalidError

VARIABLE = "UJOBS_SECRET_KEY"
VERSION = "v1"
NONCE_BYTES = 12


def _config_error(message: str) -> ConfigInvalidError:
    return ConfigInvalidError(f"{VARIABLE}: {message}", meta={"variable": VARIABLE})


def parse_keys(text: str) -> list[tuple[str, bytes]]:
    """``UJOBS_SECRET_KEY``'s keys, first first, as ``(id, 32 bytes)``: one base64 key (id
    ``k1``) or ``id:base64key,...``. The one reading of the variable, for the secrets sealed
    here and the export links the api signs (``ujobs.services.exporter``)."""
    keys: list[tuple[str, bytes]] = []
    items = [p.strip() for p in text.split(",") if p.strip()]
    for index, item in enumerate(items):
        key_id, sep, encoded = item.partition(":")
        if not sep:
            if len(items) > 1:
                raise _config_error("with several keys, write each as id:base64key")
            key_id, encoded = "k1", item
        try:
            raw = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise _config_error(
                f"key number {index + 1} is not valid base64 (make one with "
                "`ujobs webhooks new-key`)"
            ) from None
        keys.append((key_id, raw))
    return checked_keys(keys)


def checked_keys(keys: Sequence[tuple[str, bytes]]) -> list[tuple[str, bytes]]:
    """``keys`` when each has a word for an id, no id twice and 32 bytes."""
    if not keys:
        raise _config_error("no key given")
    seen: set[str] = set()
    for key_id, key in keys:
        if not key_id or ":" in key_id or "," in key_id:
            raise _config_error(f"a key id must be a non-empty word, got {key_id!r}")
        if key_id in seen:
            raise _config_error(f"the key id {key_id!r} appears twice")
        if len(key) != 32:
            raise _config_error(
                f"key {key_id!r} is {len(key)} bytes; a key is 32 (make one with "
                "`ujobs webhooks new-key`)"
            )
        seen.add(key_id)
    return list(keys)


class SecretBox:
    """Seals with the first key, opens with whichever key a sealed value names."""

    def __init__(self, keys: Sequence[tuple[str, bytes]]) -> None:
        checked = checked_keys(keys)
        self._keys = {key_id: AESGCM(key) for key_id, key in checked}
        self.current = checked[0][0]

    @classmethod
    def parse(cls, value: str | None) -> SecretBox:
        """From ``UJOBS_SECRET_KEY``'s text."""
        text = (value or "").strip()
        if not text:
            raise _config_error(
                "unset; endpoint secrets are encrypted at rest, so the webhook commands and "
                "the deliverer need a 32-byte base64 key"
            )
        return cls(parse_keys(text))

    def seal(self, secret: str, *, aad: str) -> str:
        nonce = os.urandom(NONCE_BYTES)
        sealed = self._keys[self.current].encrypt(nonce, secret.encode(), aad.encode())
        return f"{VERSION}:{self.current}:{base64.b64encode(nonce + sealed).decode()}"

    def key_of(self, sealed: str) -> str:
        """The id of the key ``sealed`` was sealed under."""
        return self._split(sealed)[0]

    def _split(self, sealed: str) -> tuple[str, bytes]:
        version, _, rest = sealed.partition(":")
        key_id, _, payload = rest.partition(":")
        if version != VERSION or not key_id or not payload:
            raise WebhookSecretInvalidError(
                "a stored secret is not in the v1:<key id>:<data> form", meta={"reason": "format"}
            )
        try:
            return key_id, base64.b64decode(payload, validate=True)
        except (binascii.Error, ValueError):
            raise WebhookSecretInvalidError(
                "a stored secret is not valid base64", meta={"reason": "format"}
            ) from None

    def open(self, sealed: str, *, aad: str) -> str:
        key_id, data = self._split(sealed)
        aes = self._keys.get(key_id)
        if aes is None:
            raise WebhookSecretInvalidError(
                f"a stored secret was sealed under key {key_id!r}, which {VARIABLE} no longer "
                "holds; put that key back (after the current one) and run `ujobs webhooks reseal`",
                meta={"reason": "unknown-key", "key_id": key_id},
            )
        try:
            return aes.decrypt(data[:NONCE_BYTES], data[NONCE_BYTES:], aad.encode()).decode()
        except InvalidTag:
            raise WebhookSecretInvalidError(
                f"a stored secret does not open under key {key_id!r} for this endpoint (a wrong "
                "key, or a value copied from another row)",
                meta={"reason": "tampered", "key_id": key_id},
            ) from None
