"""The app loader names the real cause when a user's top-level package is called like one of
ours (``shared``, ``services``, ``webhooks``, ``exports``): Python imports ours, so their
package is never read, and PYTHONPATH is not the fix."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.services.runtime.app_loader import OUR_PACKAGES, load_api, shadowing_package


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's project directory, the working directory of the service."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    return tmp_path


@pytest.mark.parametrize("package", OUR_PACKAGES)
def test_an_app_package_named_like_ours_is_x_config_invalid_saying_so(
    app_dir: Path, package: str
) -> None:
    (app_dir / package).mkdir()
    (app_dir / package / "__init__.py").write_text("")
    (app_dir / package / "jobs.py").write_text("api = None\n")

    with pytest.raises(ConfigInvalidError) as caught:
        load_api(f"{package}.jobs:api")

    message = str(caught.value)
    assert caught.value.code == "X_CONFIG_INVALID"
    assert f"top-level package {package!r}" in message
    assert "named like one of ultimate-jobs' own packages" in message
    assert "rename your package" in message
    assert "PYTHONPATH" not in message
    assert caught.value.meta["package"] == package


def test_a_module_file_named_like_ours_is_refused_too(app_dir: Path) -> None:
    (app_dir / "exports.py").write_text("api = None\n")
    assert shadowing_package("exports") == (app_dir / "exports.py")


def test_our_own_example_app_still_loads(app_dir: Path) -> None:
    registry = load_api("ujobs.services.example_app:api")
    assert registry.jobs


def test_an_app_of_its_own_name_is_not_suspected(app_dir: Path) -> None:
    (app_dir / "myapp").mkdir()
    (app_dir / "myapp" / "__init__.py").write_text("")
    assert shadowing_package("myapp.jobs") is None
    assert shadowing_package("ujobs.jobs") is None  # no folder of the user's named shared
