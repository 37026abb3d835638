"""A body driven inside the run's own task, and handed to a task of its own only when it must
outlive the run.

Why: a task per body was the largest single cost of a short job in the worker (about a fifth of
its CPU per no-op job, ``bench/RESULTS.md``, issue 39): the task, its first loop turn, its
done-callback and the future that woke the run. ``Inline`` drives the body's coroutine from the
run's task instead. A body that never waits costs no task and no loop turn; one that waits on a
future costs one future of the run's own per wait, chained to the body's, which is what its
task's wake-up cost before.

The body sees asyncio as a task's body does: ``asyncio.current_task()`` is the run's task, so
``asyncio.timeout()`` and ``TaskGroup`` work on it; cancelling that task cancels the future the
body waits on and throws ``CancelledError`` into the body, as ``Task.cancel()`` does.

``detach()`` lets the run go on without the body: at its next wake the coroutine, where it
waits, goes to a new task (``detached``) in a copy of the run's context. The attempt uses it to
abandon a halted body that swallowed its cancel, and to end a run cancelled from outside (the
drain's deadline) whose body did not end at once.
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Callable, Coroutine, Generator
from functools import partial
from typing import Any


class Detached:
    """What awaiting an ``Inline`` answers when the body was handed to a task of its own."""

    __slots__ = ()


DETACHED = Detached()


class NotStarted:
    """``Inline``'s default ``first``: the body has not run its first step yet."""

    __slots__ = ()


NOT_STARTED = NotStarted()


def _chain(wake: asyncio.Future[Any], _: asyncio.Future[Any]) -> None:
    if not wake.done():
        wake.set_result(None)


class Inline:
    """Await it once, in the run's task: answers the body's result (or raises its error), or
    ``DETACHED`` after ``detach()``."""

    __slots__ = (
        "_coro",
        "_detach",
        "_first",
        "_wake",
        "detached",
        "on_cancel_kept",
        "on_first_wait",
    )

    def __init__(self, coro: Coroutine[Any, Any, Any], first: Any = NOT_STARTED) -> None:
        """``first``: what the body yielded when it was already started (its first step run by
        the caller, ``ujobs.execution.body``); it is waited on as if this had sent it."""
        self._coro = coro
        self._first = first
        self._detach = False
        self._wake: asyncio.Future[Any] | None = None
        self.detached: asyncio.Task[Any] | None = None
        self.on_first_wait: Callable[[], None] | None = None
        """Called the first time the body waits (it did not end in its first step)."""
        self.on_cancel_kept: Callable[[], bool] | None = None
        """Asked when the body waits again after a ``CancelledError`` was thrown into it (it
        swallowed the cancel): True detaches it at once."""

    @property
    def detaching(self) -> bool:
        """``detach()`` was called (or the body swallowed an outside cancel)."""
        return self._detach

    def detach(self) -> None:
        """Hand the body to a task of its own at its next wake, and let the run go on."""
        self._detach = True
        wake = self._wake
        if wake is not None and not wake.done():
            wake.set_result(None)

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self._coro
        error: BaseException | None = None
        first = True
        pending, self._first = self._first, NOT_STARTED
        while True:
            if pending is NOT_STARTED:
                try:
                    yielded = coro.send(None) if error is None else coro.throw(error)
                except StopIteration as stop:
                    return stop.value
            else:
                yielded, pending = pending, NOT_STARTED
            cancelled, error = isinstance(error, asyncio.CancelledError), None
            if first:
                first = False
                if self.on_first_wait is not None:
                    self.on_first_wait()
            kept = self.on_cancel_kept
            if cancelled and not self._detach and kept is not None and kept():
                self._detach = True
            if self._detach:
                self._hand_off(yielded)
                return DETACHED
            if yielded is None:  # a bare yield (``asyncio.sleep(0)``): one turn of the loop
                try:
                    yield None
                except GeneratorExit:
                    coro.close()  # closed with the run's task, as ``yield from`` closes
                    raise
                except BaseException as exc:  # the run's task was cancelled in that turn
                    error = exc
                continue
            if not (asyncio.isfuture(yielded) and yielded._asyncio_future_blocking):
                error = RuntimeError(f"a job body yielded {yielded!r}, not a future")
                continue
            error = yield from self._wait(yielded)
            if self.detaching:  # detach() woke the run: the body goes on elsewhere
                self._hand_off(yielded)
                return DETACHED

    def _wait(self, waited: asyncio.Future[Any]) -> Generator[Any, Any, BaseException | None]:
        """The run's task waits on a future of its own, woken when ``waited`` is done (or by
        ``detach()``); answers what to throw into the body, if anything."""
        wake: asyncio.Future[Any] = waited.get_loop().create_future()
        woken = partial(_chain, wake)
        waited.add_done_callback(woken)
        self._wake = wake
        try:
            yield from wake
        except GeneratorExit:
            self._coro.close()
            raise
        except BaseException as exc:  # the run's task cancelled (or thrown into): the body too
            if isinstance(exc, asyncio.CancelledError) and not waited.done():
                waited.cancel()
            return exc
        finally:
            self._wake = None
            waited.remove_done_callback(woken)
        return None

    def _hand_off(self, waiting: Any) -> None:
        if isinstance(waiting, asyncio.Future) and not waiting.done():
            waiting._asyncio_future_blocking = True  # the new task waits on it as the body did
        resume = _Resume(self._coro, waiting)
        self.detached = asyncio.get_running_loop().create_task(
            _drive(resume), context=contextvars.copy_context()
        )


class _Resume:
    """The rest of a detached body: first what it waits on, then plain delegation."""

    __slots__ = ("_coro", "_waiting")

    def __init__(self, coro: Coroutine[Any, Any, Any], waiting: Any) -> None:
        self._coro = coro
        self._waiting = waiting

    def __await__(self) -> Generator[Any, Any, Any]:
        coro, yielded = self._coro, self._waiting
        self._waiting = None
        # What it waits on first is waited on only while pending (or a bare yield's one turn).
        waits = yielded is None or (isinstance(yielded, asyncio.Future) and not yielded.done())
        error: BaseException | None = None
        while True:
            if waits:
                try:
                    yield yielded
                except GeneratorExit:
                    coro.close()
                    raise
                except BaseException as exc:
                    error = exc
            waits = True
            try:
                yielded = coro.send(None) if error is None else coro.throw(error)
            except StopIteration as stop:
                return stop.value
            error = None


async def _drive(resume: _Resume) -> Any:
    return await resume
