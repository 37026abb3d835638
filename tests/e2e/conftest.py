"""What every end-to-end test gets: no worker process outlives the test that started it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.e2e.test_worker_processes import WorkerProcess


@pytest.fixture(autouse=True)
async def reap_worker_processes() -> AsyncIterator[None]:
    yield
    await WorkerProcess.reap_all()
