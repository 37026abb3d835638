"""``ujobs exporter``'s configuration: the exports queue, the store, the signing key."""

from __future__ import annotations

from pathlib import Path

import pytest

from exports.sinks import ObjectStoreSink, default_sink
from services.exporter import ExportSettings, exporter_config
from shared.errors import ConfigInvalidError


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


def test_a_short_secret_key_is_refused_and_the_key_never_prints() -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        ExportSettings.load({"UJOBS_SECRET_KEY": "short"})
    assert caught.value.meta["variable"] == "UJOBS_SECRET_KEY"
    settings = ExportSettings.load({"UJOBS_SECRET_KEY": "s" * 32})
    assert settings.secret_key == b"s" * 32
    assert "sss" not in repr(settings)


def test_a_bad_store_url_names_the_variable() -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        ExportSettings.load({"UJOBS_EXPORT_URL": "nope://x"}).install()
    assert caught.value.meta["variable"] == "UJOBS_EXPORT_URL"
