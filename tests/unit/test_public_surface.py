"""The public import paths a user types: ``ujobs`` answers ``Enqueued``, and ``ujobs.drivers``
is typed for a type checker (its lazily imported builders are not ``Any``, an unknown name is an
error) while still importing no backend until one is asked for."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from mypy import api

import ujobs
from ujobs.drivers.records import Enqueued

ROOT = Path(__file__).resolve().parents[2]

USER_CODE = """
from typing import assert_type
import asyncpg
from ujobs import Enqueued
from ujobs.drivers import memory_driver, postgres_driver, redis_driver
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.redis.driver import RedisDriver

async def boot(pool: asyncpg.Pool) -> None:
    assert_type(postgres_driver(pool), PostgresDriver)
    assert_type(memory_driver(), MemoryDriver)
    assert_type(redis_driver(), RedisDriver)

def answered(e: Enqueued) -> str:
    return e.id
"""

MISTAKE = """
from ujobs.drivers import postgres_drvier
"""


def _mypy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str) -> tuple[int, str]:
    source = tmp_path / "user.py"
    source.write_text(code)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n")
    # Outside the checkout, as a user's project is: ``ujobs`` is found through the install (an
    # editable one is a tree of links, so its real types are seen, not ``Any``).
    monkeypatch.chdir(tmp_path)
    out, err, status = api.run(
        ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), str(source)]
    )
    return status, out + err


def test_enqueued_is_importable_from_ujobs() -> None:
    assert ujobs.Enqueued is Enqueued
    assert "Enqueued" in ujobs.__all__


def test_the_driver_builders_are_typed_for_a_type_checker(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, output = _mypy(tmp_path, monkeypatch, USER_CODE)
    assert status == 0, output


def test_a_misspelt_builder_is_a_type_error_not_any(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    status, output = _mypy(tmp_path, monkeypatch, MISTAKE)
    assert status == 1, output
    assert "postgres_drvier" in output


@pytest.mark.parametrize("name", ["shared", "services", "webhooks", "exports"])
def test_only_ujobs_is_installed_no_folder_name_leaks(tmp_path: Path, name: str) -> None:
    """A user's own ``services`` (or ``shared``, ``webhooks``, ``exports``) package is theirs:
    outside the checkout, those names are not importable from the install at all."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            f"import ujobs, ujobs.{name if name != 'shared' else 'jobs'}; import {name}",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"No module named '{name}'" in done.stderr


def test_importing_shared_drivers_imports_no_backend() -> None:
    code = (
        "import sys, ujobs.drivers\n"
        "loaded = [m for m in sys.modules if m.startswith(('asyncpg', 'redis'))"
        " or m.startswith('ujobs.drivers.') and m.endswith('.driver')]\n"
        "print(sorted(loaded))\n"
        "from ujobs.drivers import memory_driver\n"
        "print(memory_driver.__module__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["[]", "ujobs.drivers.memory.driver"]
