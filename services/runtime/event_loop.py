"""The event loop a service process runs on (``UJOBS_EVENT_LOOP``).

uvloop (libuv under asyncio's interface, by the authors of asyncpg) schedules callbacks, wakes
tasks and moves socket bytes in compiled code, where the standard loop runs Python for each:
a drained no-op job costs the worker about 6 % fewer instructions on it (bench/RESULTS.md).
``auto`` (the default) takes uvloop where it is installed (a dependency on Linux and macOS)
and the standard loop elsewhere; ``asyncio`` keeps the standard one. Only the service
processes ``ujobs`` starts choose; a worker embedded in an application runs on the host's loop.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal, TypeVar

from ujobs.services.config.parse import choice, invalid
from ujobs.services.config.variables import EVENT_LOOPS

T = TypeVar("T")

EventLoopName = Literal["uvloop", "asyncio"]
__all__ = ["EventLoopName", "loop_from_env", "loop_in_use", "resolve_event_loop", "run_on"]


def resolve_event_loop(choice: str) -> EventLoopName:
    """The loop ``choice`` (one of ``EVENT_LOOPS``) names on this machine; ``uvloop`` asked for
    where it is not installed is ``X_CONFIG_INVALID``, not a silent fallback."""
    if choice == "asyncio":
        return "asyncio"
    if importlib.util.find_spec("uvloop") is not None:
        return "uvloop"
    if choice == "uvloop":
        raise invalid(
            "UJOBS_EVENT_LOOP",
            "uvloop is not installed in this environment (pip install uvloop; it has no "
            "Windows build), or set UJOBS_EVENT_LOOP=asyncio",
            value=choice,
        )
    return "asyncio"


def loop_from_env(env: Mapping[str, str]) -> EventLoopName:
    """The loop ``UJOBS_EVENT_LOOP`` in ``env`` names, read as ``ujobs`` services read it: what
    a bench that builds its worker by hand runs on, to match ``ujobs worker``."""
    raw = env.get("UJOBS_EVENT_LOOP")
    return resolve_event_loop(
        "auto" if raw is None else choice("UJOBS_EVENT_LOOP", raw, EVENT_LOOPS)
    )


def _factory(name: EventLoopName) -> Callable[[], asyncio.AbstractEventLoop] | None:
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    return None


def run_on(name: EventLoopName, main: Coroutine[Any, Any, T]) -> T:
    """``asyncio.run(main)`` on a new loop of kind ``name``."""
    with asyncio.Runner(loop_factory=_factory(name)) as runner:
        return runner.run(main)


def loop_in_use() -> str:
    """The running loop's kind as the service's start line reports it."""
    module = type(asyncio.get_running_loop()).__module__
    return "uvloop" if module.startswith("uvloop") else "asyncio"
