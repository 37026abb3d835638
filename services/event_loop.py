"""The event loop a long-running service runs on: uvloop where it is installed, else asyncio's.

Most of a worker's time on a short job goes to event-loop work: tasks, callbacks and socket
reads for asyncpg and Redis. uvloop does that work in C. Measured with
``bench/worker_drain_micro.py`` (one worker, 16 slots, 10,000 no-op jobs, runs paired back to
back): drain +8 to +15 %, worker CPU per job -7 to -17 %. ``UJOBS_EVENT_LOOP`` chooses:

* ``auto`` (the default): uvloop if it can be imported, else asyncio's loop. uvloop is a
  dependency on every platform it supports (not Windows).
* ``uvloop``: uvloop or nothing. A service that cannot import it refuses to start
  (``X_CONFIG_INVALID``), so you never run on a loop you did not expect.
* ``asyncio``: the standard library's loop.

The operator commands and ``ujobs db migrate`` are short-lived and stay on asyncio's loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from shared.errors import ConfigInvalidError

EVENT_LOOPS = ("auto", "uvloop", "asyncio")
DEFAULT_EVENT_LOOP = "auto"

T = TypeVar("T")
LoopFactory = Callable[[], asyncio.AbstractEventLoop]


def loop_factory(choice: str) -> LoopFactory | None:
    """The factory of the loop ``choice`` names; None means asyncio's default loop."""
    if choice not in EVENT_LOOPS:
        raise ConfigInvalidError(
            f"UJOBS_EVENT_LOOP: {choice!r} is not one of {', '.join(EVENT_LOOPS)}",
            meta={"variable": "UJOBS_EVENT_LOOP", "value": choice},
        )
    if choice == "asyncio":
        return None
    try:
        import uvloop
    except ImportError as exc:
        if choice == "uvloop":
            raise ConfigInvalidError(
                "UJOBS_EVENT_LOOP=uvloop, but uvloop cannot be imported here",
                meta={
                    "variable": "UJOBS_EVENT_LOOP",
                    "value": choice,
                    "error": repr(exc),
                    "fix": "pip install uvloop, or set UJOBS_EVENT_LOOP=auto or asyncio",
                },
            ) from exc
        return None
    factory: LoopFactory = uvloop.new_event_loop
    return factory


def running_loop_name() -> str:
    """``uvloop`` or ``asyncio``: what the running loop is (the started log line says it)."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.partition(".")[0] == "uvloop" else "asyncio"


def run_on(choice: str, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on the loop ``choice`` names."""
    try:
        factory = loop_factory(choice)
    except BaseException:
        main.close()  # never awaited: close it so Python does not warn about it
        raise
    with asyncio.Runner(loop_factory=factory) as runner:
        return runner.run(main)
