"""``UJOBS_EVENT_LOOP``: which loop a service process runs on, and a refusal (not a silent
fallback) when uvloop is asked for where it is not installed."""

from __future__ import annotations

import importlib.util

import pytest

from ujobs.errors import UltimateError
from ujobs.services.runtime.event_loop import (
    loop_from_env,
    loop_in_use,
    resolve_event_loop,
    run_on,
)


async def _kind() -> str:
    return loop_in_use()


def test_auto_is_uvloop_where_installed_and_asyncio_is_always_the_standard_loop() -> None:
    assert importlib.util.find_spec("uvloop") is not None  # a dependency on this platform
    assert resolve_event_loop("auto") == "uvloop"
    assert resolve_event_loop("uvloop") == "uvloop"
    assert resolve_event_loop("asyncio") == "asyncio"


def test_each_loop_runs_the_service_coroutine_on_its_own_kind() -> None:
    assert run_on("uvloop", _kind()) == "uvloop"
    assert run_on("asyncio", _kind()) == "asyncio"


def test_without_uvloop_auto_falls_back_and_an_explicit_uvloop_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    assert resolve_event_loop("auto") == "asyncio"
    with pytest.raises(UltimateError) as refused:
        resolve_event_loop("uvloop")
    assert refused.value.code == "X_CONFIG_INVALID"
    assert "UJOBS_EVENT_LOOP" in refused.value.message
    assert "UJOBS_EVENT_LOOP=asyncio" in refused.value.message


def test_a_bench_reads_the_variable_as_the_services_do() -> None:
    assert loop_from_env({}) == "uvloop"
    assert loop_from_env({"UJOBS_EVENT_LOOP": "AsyncIO"}) == "asyncio"
    with pytest.raises(UltimateError) as refused:
        loop_from_env({"UJOBS_EVENT_LOOP": "uvlop"})
    assert refused.value.code == "X_CONFIG_INVALID"
