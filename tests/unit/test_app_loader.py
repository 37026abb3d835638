"""The app loader imports the user's own packages, whatever they are called: ultimate-jobs
installs one name (``ujobs``), so an app's ``services``, ``shared``, ``webhooks`` or ``exports``
package is the one imported (``tests/e2e/test_user_app_names.py`` runs such an app under real
processes)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ujobs.errors import ConfigInvalidError
from ujobs.services.runtime.app_loader import load_api

APP = """
import sys
from typing import Any

from ujobs import Run, define_api, job, t


@job(input=t.object(), idempotency_key=lambda i: "one", tenant="none")
async def {name}_job(run: Run[Any]) -> None:
    return None


api = define_api(jobs=[sys.modules[__name__]])
"""


@pytest.fixture
def app_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The user's project directory, the working directory of the service."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", *sys.path])
    return tmp_path


@pytest.mark.parametrize("package", ["services", "shared", "webhooks", "exports"])
def test_an_app_package_named_like_our_folders_is_the_one_loaded(
    app_dir: Path, package: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (app_dir / package).mkdir()
    (app_dir / package / "__init__.py").write_text("")
    (app_dir / package / "jobs.py").write_text(APP.format(name=package))
    for name in [m for m in sys.modules if m == package or m.startswith(package + ".")]:
        monkeypatch.delitem(sys.modules, name)

    registry = load_api(f"{package}.jobs:api")

    assert list(registry.jobs) == [f"{package}_job"]


def test_a_missing_module_is_x_config_invalid_naming_it(app_dir: Path) -> None:
    with pytest.raises(ConfigInvalidError) as caught:
        load_api("nowhere.jobs:api")
    assert caught.value.code == "X_CONFIG_INVALID"
    assert "'nowhere.jobs'" in str(caught.value)


def test_our_own_example_app_still_loads(app_dir: Path) -> None:
    registry = load_api("ujobs.services.example_app:api")
    assert registry.jobs
