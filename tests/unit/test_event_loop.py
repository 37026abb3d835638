"""``services/event_loop.py``: which loop a service runs on for each ``UJOBS_EVENT_LOOP``, and
the refusal when uvloop is demanded but cannot be imported."""

from __future__ import annotations

import sys

import pytest

from services.event_loop import loop_factory, run_on, running_loop_name
from shared.errors import ConfigInvalidError


async def which_loop() -> str:
    return running_loop_name()


def test_auto_and_uvloop_run_on_uvloop_where_it_is_installed() -> None:
    assert run_on("auto", which_loop()) == "uvloop"
    assert run_on("uvloop", which_loop()) == "uvloop"


def test_asyncio_runs_on_the_standard_loop() -> None:
    assert loop_factory("asyncio") is None
    assert run_on("asyncio", which_loop()) == "asyncio"


def test_without_uvloop_auto_falls_back_and_uvloop_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "uvloop", None)  # import uvloop now raises ImportError
    assert run_on("auto", which_loop()) == "asyncio"
    never_run = which_loop()
    with pytest.raises(ConfigInvalidError) as info:
        run_on("uvloop", never_run)
    assert info.value.code == "X_CONFIG_INVALID"
    assert info.value.meta["variable"] == "UJOBS_EVENT_LOOP"
    assert "pip install uvloop" in info.value.meta["fix"]
    assert never_run.cr_frame is None  # closed, not left to warn "never awaited"


def test_a_name_that_is_no_loop_is_refused() -> None:
    with pytest.raises(ConfigInvalidError) as info:
        loop_factory("trio")
    assert info.value.meta == {"variable": "UJOBS_EVENT_LOOP", "value": "trio"}
