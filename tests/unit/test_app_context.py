"""``define_api(context=)``: checked at declaration, entered once around ``ujobs.testing``'s
drain (its value is ``run.ctx``), carried to the webhook deliverer's registry, and a factory
that is no async context manager, or raises, is ``X_APP_CONTEXT_FAILED``."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest

from ujobs import Run, define_api, job, t
from ujobs.errors import AppContextFailedError, InvariantError
from ujobs.jobs.app_context import open_app_context
from ujobs.services.webhook_deliverer import deliverer_registry
from ujobs.testing import drain, install_memory_driver, uninstall_memory_driver

EVENTS: list[str] = []


@job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"n:{i.n}", tenant="none")
async def reads_ctx(run: Run[Any]) -> str:
    EVENTS.append(f"ran with {run.ctx}")
    return str(run.ctx)


@contextlib.asynccontextmanager
async def resources() -> AsyncIterator[str]:
    EVENTS.append("opened")
    try:
        yield "the app's pool"
    finally:
        EVENTS.append("closed")


@pytest.fixture(autouse=True)
def memory() -> Iterator[None]:
    EVENTS.clear()
    install_memory_driver()
    yield
    uninstall_memory_driver()


def test_define_api_refuses_a_context_that_is_not_callable() -> None:
    with pytest.raises(InvariantError, match="context=") as caught:
        define_api(jobs=[sys.modules[__name__]], context="pool", install=False)  # type: ignore[arg-type]
    assert caught.value.code == "X_INVARIANT"


async def test_drain_enters_the_apis_context_once_around_every_run() -> None:
    api = define_api(jobs=[sys.modules[__name__]], context=resources, install=False)
    assert api.context is resources
    assert api.registry().context is resources
    for n in range(2):
        await reads_ctx.enqueue({"n": n})
    drained = await drain(api=api)
    assert drained.results(reads_ctx) == ["the app's pool", "the app's pool"]
    assert EVENTS == ["opened", "ran with the app's pool", "ran with the app's pool", "closed"]


async def test_a_context_given_to_drain_wins_and_the_factory_is_not_entered() -> None:
    api = define_api(jobs=[sys.modules[__name__]], context=resources, install=False)
    await reads_ctx.enqueue({"n": 1})
    drained = await drain(api=api, context="mine")
    assert drained.results(reads_ctx) == ["mine"]
    assert EVENTS == ["ran with mine"]


async def test_a_factory_answering_no_context_manager_is_x_app_context_failed() -> None:
    async def not_a_manager() -> str:
        return "pool"

    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(AppContextFailedError, match="asynccontextmanager") as caught:
            await open_app_context(stack, not_a_manager)  # type: ignore[arg-type]
    assert caught.value.code == "X_APP_CONTEXT_FAILED"
    assert caught.value.meta["answered"] == "coroutine"


async def test_a_factory_that_raises_is_x_app_context_failed_naming_the_cause() -> None:
    @contextlib.asynccontextmanager
    async def down() -> AsyncIterator[str]:
        if not EVENTS:
            raise OSError("connection refused")
        yield "never"

    async with contextlib.AsyncExitStack() as stack:
        with pytest.raises(AppContextFailedError, match="OSError: connection refused"):
            await open_app_context(stack, down)


def test_the_webhook_deliverer_runs_the_apps_jobs_with_the_apps_context() -> None:
    from tests.e2e import context_app

    registry = deliverer_registry("tests.e2e.context_app:api")
    assert registry.context is context_app.resources
    assert "uses_ctx.ctx" in registry.jobs
