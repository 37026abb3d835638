"""A service on a server without autovacuum says so once at start, and says nothing when the
server runs it."""

from __future__ import annotations

import logging
from typing import Any

import asyncpg
import pytest

from services.autovacuum_check import AUTOVACUUM_OFF, warn_without_autovacuum


class Setting:
    """A pool stand-in answering one value for ``current_setting('autovacuum')``."""

    def __init__(self, value: str) -> None:
        self.value = value
        self.asked: list[str] = []

    async def fetchval(self, query: str, *args: Any) -> Any:
        self.asked.append(query)
        return self.value


async def test_autovacuum_off_is_one_warning_naming_the_service(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="ujobs.service"):
        assert await warn_without_autovacuum(Setting("off"), "worker")
    [record] = [r for r in caplog.records if r.getMessage() == AUTOVACUUM_OFF]
    assert record.service == "worker"  # type: ignore[attr-defined]
    assert "VACUUM ANALYZE" in record.hint  # type: ignore[attr-defined]


async def test_autovacuum_on_says_nothing(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="ujobs.service"):
        assert not await warn_without_autovacuum(Setting("on"), "worker")
    assert not [r for r in caplog.records if r.getMessage() == AUTOVACUUM_OFF]


async def test_the_check_reads_the_servers_own_setting(pg_pool: asyncpg.Pool[Any]) -> None:
    actual = await pg_pool.fetchval("show autovacuum")
    assert await warn_without_autovacuum(pg_pool, "api") is (actual == "off")
