"""A service where autovacuum does not run on x_jobs says so once at start, naming what to
set, and says nothing when it runs."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

from ujobs.services.runtime.autovacuum_check import AUTOVACUUM_OFF, warn_without_autovacuum


class Setting:
    """A pool stand-in answering the fixes ``server_autovacuum`` found."""

    def __init__(self, value: list[str]) -> None:
        self.value = value
        self.asked: list[str] = []

    async def fetchval(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        return self.value


async def test_autovacuum_off_is_one_warning_naming_the_service(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ujobs.service"):
        assert await warn_without_autovacuum(
            Setting(["autovacuum = on", "track_counts = on"]), "worker"
        )
    [record] = [r for r in caplog.records if r.getMessage() == AUTOVACUUM_OFF]
    assert record.service == "worker"  # type: ignore[attr-defined]
    assert record.set == "autovacuum = on; track_counts = on"  # type: ignore[attr-defined]
    assert "VACUUM ANALYZE" in record.hint  # type: ignore[attr-defined]


async def test_autovacuum_on_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ujobs.service"):
        assert not await warn_without_autovacuum(Setting([]), "worker")
    assert not [r for r in caplog.records if r.getMessage() == AUTOVACUUM_OFF]


async def test_the_check_reads_the_servers_own_setting(pg_pool: asyncpg.Pool[Any]) -> None:
    actual = await pg_pool.fetchval("show autovacuum")
    assert await warn_without_autovacuum(pg_pool, "api") is (actual == "off")


async def test_x_jobs_opted_out_of_autovacuum_is_named(
    pg_pool: asyncpg.Pool[Any], caplog: pytest.LogCaptureFixture
) -> None:
    await pg_pool.execute("alter table x_jobs set (autovacuum_enabled = off)")
    try:
        with caplog.at_level(logging.WARNING, logger="ujobs.service"):
            assert await warn_without_autovacuum(pg_pool, "worker")
    finally:  # the database serves the next test of this process
        await pg_pool.execute("alter table x_jobs reset (autovacuum_enabled)")
    [record] = [r for r in caplog.records if r.getMessage() == AUTOVACUUM_OFF]
    assert "alter table x_jobs reset (autovacuum_enabled)" in record.set  # type: ignore[attr-defined]
