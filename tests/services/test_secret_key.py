"""Where ``UJOBS_SECRET_KEY`` comes from: the variable or the file ``UJOBS_SECRET_KEY_FILE``
names (compose's keygen writes it), refused when both or neither make sense, and written by
``ujobs webhooks new-key --into`` once, never over a key that is there."""

from __future__ import annotations

import base64
import stat
from pathlib import Path

import pytest

from tests.support.cli import json_of, ujobs
from ujobs.errors import ConfigInvalidError
from ujobs.services.exporter import ExportSettings
from ujobs.services.runtime.secret_key import secret_key_text, write_key_file
from ujobs.services.webhook_deliverer import webhook_settings
from ujobs.webhooks.store_pg import new_secret_key


def test_the_key_is_read_from_the_variable_or_from_the_file(tmp_path: Path) -> None:
    key = new_secret_key()
    path = tmp_path / "secret-key"
    path.write_text(key + "\n")
    assert secret_key_text({"UJOBS_SECRET_KEY": key}) == key
    assert secret_key_text({"UJOBS_SECRET_KEY_FILE": str(path)}) == key
    assert secret_key_text({"UJOBS_SECRET_KEY_FILE": " ", "UJOBS_SECRET_KEY": ""}) is None


def test_both_set_is_refused_naming_both(tmp_path: Path) -> None:
    path = tmp_path / "secret-key"
    path.write_text(new_secret_key())
    with pytest.raises(ConfigInvalidError) as caught:
        secret_key_text({"UJOBS_SECRET_KEY": new_secret_key(), "UJOBS_SECRET_KEY_FILE": str(path)})
    assert "UJOBS_SECRET_KEY or UJOBS_SECRET_KEY_FILE, not both" in caught.value.message


@pytest.mark.parametrize("content", [None, "", "  \n"])
def test_a_missing_or_empty_file_is_refused_saying_how_to_make_one(
    tmp_path: Path, content: str | None
) -> None:
    path = tmp_path / "secret-key"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigInvalidError) as caught:
        secret_key_text({"UJOBS_SECRET_KEY_FILE": str(path)})
    assert caught.value.meta == {"variable": "UJOBS_SECRET_KEY_FILE", "path": str(path)}
    assert f"ujobs webhooks new-key --into {path}" in caught.value.message


def test_the_deliverer_and_the_exporter_read_the_key_from_the_file(tmp_path: Path) -> None:
    key = new_secret_key()
    path = tmp_path / "secret-key"
    path.write_text(key + "\n")
    env = {"UJOBS_SECRET_KEY_FILE": str(path)}
    box = webhook_settings(env).box
    assert box.open(box.seal("whsec_x", aad="ep_1"), aad="ep_1") == "whsec_x"
    assert ExportSettings.load(env).secret_key == base64.b64decode(key)  # the same key
    with pytest.raises(ConfigInvalidError, match="UJOBS_SECRET_KEY: unset"):
        webhook_settings({})


def test_write_key_file_writes_owner_only_and_keeps_a_key_that_is_there(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "secret-key"
    first, second = new_secret_key(), new_secret_key()
    assert write_key_file(path, first) is True
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert write_key_file(path, second) is False
    assert path.read_text().strip() == first
    path.write_text("")
    assert write_key_file(path, second) is True  # an empty file holds no key yet
    assert path.read_text().strip() == second


def test_new_key_into_writes_once_and_prints_no_key(tmp_path: Path) -> None:
    path = tmp_path / "secret-key"
    made = ujobs("webhooks", "new-key", "--into", str(path), "--json")
    assert json_of(made) == {"path": str(path), "written": True}
    key = path.read_text().strip()
    assert len(base64.b64decode(key)) == 32
    again = ujobs("webhooks", "new-key", "--into", str(path))
    assert again.exit_code == 0
    assert key not in again.stdout + again.stderr
    assert "kept" in again.stderr
    assert path.read_text().strip() == key


def test_new_key_into_an_unwritable_place_is_a_config_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = ujobs("webhooks", "new-key", "--into", str(blocker / "secret-key"), "--json")
    assert result.exit_code != 0
    assert "X_CONFIG_INVALID" in result.stdout + result.stderr
