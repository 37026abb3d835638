"""``define_api(context=factory)``: the resources an app opens once per process for its runs.

A job body needs the app's own things — a pool on the app's database, an HTTP client, a
partner's SDK — and opening them per attempt costs a connection handshake per job, while a
module-level global is opened at import, before the event loop that must own it. So the app
hands ``define_api`` a factory: a zero-argument function answering an async context manager
(an ``@contextlib.asynccontextmanager`` function is one). Every service that runs jobs
(``ujobs worker``, ``exporter``, ``webhook-deliverer``, ``dev``) enters it once at start, before
it claims anything; what it yields is ``run.ctx`` in every run (and ``settled.ctx`` in
``on_settled``); it is exited after the drain, when no run holds it any more, before the
library's own connections close. ``ujobs.testing.drain(api=...)`` enters it around a drain.

A factory that raises (the app's database is down, a setting is missing) stops the service at
start with ``X_APP_CONTEXT_FAILED`` naming the cause, instead of every run failing on it later.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from ujobs.errors import AppContextFailedError, InvariantError, UltimateError

AppContext = Callable[[], AbstractAsyncContextManager[Any]]
"""What ``define_api(context=)`` takes: a zero-argument function answering an async context
manager whose value is ``run.ctx``."""

__all__ = ["AppContext", "checked_context", "open_app_context"]


def checked_context(context: Any) -> AppContext | None:
    """``define_api``'s check of ``context=``: None, or something callable."""
    if context is None or callable(context):
        return context  # type: ignore[no-any-return]
    raise InvariantError(
        "define_api(context=) takes a function answering an async context manager (an "
        "@contextlib.asynccontextmanager function), entered once per process; got "
        f"{type(context).__name__}",
        meta={"got": type(context).__name__},
    )


async def open_app_context(stack: contextlib.AsyncExitStack, context: AppContext | None) -> Any:
    """Enter ``context()`` on ``stack`` (exited with it) and answer what it yields; None
    without a factory. Anything the factory raises is ``X_APP_CONTEXT_FAILED``."""
    if context is None:
        return None
    name = getattr(context, "__qualname__", type(context).__name__)
    try:
        manager: object = context()  # typed as promised; checked, since apps pass anything
    except UltimateError:
        raise
    except Exception as exc:
        raise _failed(name, exc) from exc
    if not isinstance(manager, AbstractAsyncContextManager):
        if inspect.iscoroutine(manager):
            manager.close()  # an `async def` factory's coroutine, never to be awaited
        raise AppContextFailedError(
            f"define_api(context={name}) answered a {type(manager).__name__}, not an async "
            "context manager; decorate the function with @contextlib.asynccontextmanager and "
            "yield the value runs get as run.ctx",
            meta={"context": name, "answered": type(manager).__name__},
        )
    try:
        return await stack.enter_async_context(manager)
    except UltimateError:
        raise
    except Exception as exc:
        raise _failed(name, exc) from exc


def _failed(name: str, exc: Exception) -> AppContextFailedError:
    return AppContextFailedError(
        f"the app's define_api(context={name}) failed while opening its resources: "
        f"{type(exc).__name__}: {exc}; no job runs until it opens",
        meta={"context": name, "cause": type(exc).__name__},
    )
