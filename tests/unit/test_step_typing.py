"""``run.step.run`` types its answer for both kinds of step fn a body passes: a type checker
solves the result of an async fn (its awaited value) as it does a plain one. A single
``Callable[[Signal], Awaitable[R] | R]`` signature left R unsolved for async fns, so every
``await run.step.run("x", async_fn)`` failed ``mypy --strict`` in a user's code."""

from __future__ import annotations

from pathlib import Path

import pytest
from mypy import api

ROOT = Path(__file__).resolve().parents[2]

BODY = """
from typing import Any, assert_type
from ujobs.execution.run import Run
from ujobs.signal import Signal

async def fetch(n: int) -> dict[str, int]:
    return {"n": n}

async def native(signal: Signal) -> int:
    return 3

async def body(run: Run[Any]) -> None:
    assert_type(await run.step.run("sync", lambda signal: "s"), str)
    assert_type(await run.step.run("native", native), int)
    # A lambda answering a coroutine matches both signatures (its parameter is inferred), so
    # mypy answers Any: accepted where the body names the type, never an error.
    org: dict[str, int] = await run.step.run("coro", lambda signal: fetch(1))
    assert_type(org, dict[str, int])
"""


def test_step_run_answers_the_fns_result_type_for_sync_and_async_fns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    body = tmp_path / "body.py"
    body.write_text(BODY)
    config = tmp_path / "mypy.ini"
    config.write_text("[mypy]\nstrict = True\nfollow_imports = silent\n")
    monkeypatch.chdir(ROOT)  # where ``shared`` is found
    out, err, status = api.run(
        ["--config-file", str(config), "--cache-dir", str(tmp_path / "cache"), str(body)]
    )
    assert status == 0, out + err
