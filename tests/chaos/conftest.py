"""The chaos tests' private Postgres (``initdb`` on a free port, fsync off: a restart is a
fast shutdown, which loses nothing committed); skipped where no Postgres binaries exist."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.harness import PG_SETTINGS
from tests.support.restartable import PrivatePostgres, postgres_bin_dir


@pytest.fixture
def private_pg() -> Iterator[PrivatePostgres]:
    try:
        postgres_bin_dir()
    except RuntimeError as exc:
        pytest.skip(str(exc))
    with PrivatePostgres(settings={"fsync": "off", **PG_SETTINGS}) as pg:
        yield pg
