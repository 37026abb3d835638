"""``ujobs exporter``'s configuration: the exports queue, the store, the signing key."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.exports.sinks import ObjectStoreSink, default_sink
from ujobs.services.exporter import ExportSettings, exporter_config
from ujobs.webhooks.secrets import SecretBox


def test_the_exporter_serves_the_exports_queue_and_installs_the_store(tmp_path: Path) -> None:
    config = exporter_config(
        {
            "DATABASE_URL": "postgresql://u@localhost/db",
            "UJOBS_QUEUES": "mail",
            "UJOBS_EXPORT_URL": f"file://{tmp_path}",
        }
    )
    assert config.queues == ("exports",)
    sink = default_sink()
    assert isinstance(sink, ObjectStoreSink)
    assert sink.url == tmp_path.resolve().as_uri()


@pytest.mark.parametrize(
    "value",
    [
        "short",
        "s" * 32,  # base64 of 24 bytes
        "a passphrase someone typed, long enough for an HMAC",
        base64.b64encode(bytes(16)).decode(),
    ],
)
def test_a_key_the_webhook_deliverer_would_refuse_is_refused_here_too(value: str) -> None:
    """One ``UJOBS_SECRET_KEY`` serves the exporter, the api's links and the webhook secrets,
    so the exporter reads it as the deliverer does and refuses what the deliverer would; the
    error names the variable and never the value."""
    with pytest.raises(ConfigInvalidError) as caught:
        ExportSettings.load({"UJOBS_SECRET_KEY": value})
    assert caught.value.meta["variable"] == "UJOBS_SECRET_KEY"
    assert value not in str(caught.value)
    with pytest.raises(ConfigInvalidError):
        SecretBox.parse(value)


def test_the_first_key_signs_every_key_checks_and_none_prints() -> None:
    new, old = bytes(range(32)), bytes(range(1, 33))
    one = ExportSettings.load({"UJOBS_SECRET_KEY": base64.b64encode(new).decode()})
    assert (one.secret_key, one.secret_keys) == (new, (new,))
    text = f"new:{base64.b64encode(new).decode()},old:{base64.b64encode(old).decode()}"
    rotating = ExportSettings.load({"UJOBS_SECRET_KEY": text})
    assert (rotating.secret_key, rotating.secret_keys) == (new, (new, old))
    assert base64.b64encode(new).decode() not in repr(rotating)
    assert "new" not in repr(rotating).replace("ExportSettings", "")
    assert ExportSettings.load({}).secret_key is None


def test_a_bad_store_url_names_the_variable() -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        ExportSettings.load({"UJOBS_EXPORT_URL": "nope://x"}).install()
    assert caught.value.meta["variable"] == "UJOBS_EXPORT_URL"
