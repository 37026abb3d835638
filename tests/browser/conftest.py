"""Fixtures of the browser tests: one headless chromium per test, the api app on a real port
(aiohttp's test server) over this test's database, and screenshots under the test's tmp dir."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from playwright.async_api import Browser, async_playwright

from tests.browser.families import FAMILIES_APP, SECRET_KEY
from tests.browser.support import CHROMIUM, Dash
from tests.services.api_support import MakeClient, make_api
from ujobs.exports.sinks import reset_default_sink


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if CHROMIUM is None:
        pytest.skip(
            "chromium is not installed and could not be (.ci/run installs Debian's chromium)"
        )
    async with async_playwright() as playwright:
        # --no-sandbox: CI runs as root, where chromium's sandbox refuses to start.
        launched = await playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield launched
        finally:
            await launched.close()


@pytest.fixture
async def dash(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    browser: Browser,
    tmp_path: Path,
) -> AsyncIterator[Dash]:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    base = str(api.client.make_url("")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    board = Dash(api=api, base=base, browser=browser, dsn=pg_dsn, shots=shots)
    try:
        yield board
    finally:
        for page in board.pages:
            await page.context.close()


@pytest.fixture
async def family_dash(
    aiohttp_client: MakeClient,
    pg_dsn: str,
    pg_pool: asyncpg.Pool[Any],
    browser: Browser,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[Dash]:
    """The api over the families app (backfills, exports), in ``production``, with a secret
    key (webhook secrets, export links) and exports written under the test's tmp dir."""
    store = tmp_path / "store"
    store.mkdir()
    monkeypatch.setenv("UJOBS_SECRET_KEY", SECRET_KEY)
    monkeypatch.setenv("UJOBS_EXPORT_URL", str(store))
    api = await make_api(
        aiohttp_client,
        pg_dsn,
        pg_pool,
        UJOBS_APP=FAMILIES_APP,
        UJOBS_ENVIRONMENT="production",
    )
    base = str(api.client.make_url("")).rstrip("/")
    shots = tmp_path / "screenshots"
    shots.mkdir()
    board = Dash(api=api, base=base, browser=browser, dsn=pg_dsn, shots=shots)
    try:
        yield board
    finally:
        for page in board.pages:
            await page.context.close()
        reset_default_sink()  # the api made UJOBS_EXPORT_URL this process's default sink
