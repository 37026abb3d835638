"""``Signal``: the Python shape of an AbortSignal.

A deadline, a drain, a lost lease and a cancel all end an attempt the same way: they abort the
run's signal with a reason (an ``UltimateError``), and whoever watches it — a step, an HTTP
call, the executor — stops. The first reason wins, so the verdict is read off the signal, not
off whatever error the body happened to unwind with.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from ujobs.errors import JobAbortedError

AbortCallback = Callable[[BaseException], None]


class Signal:
    """Aborted once, with a reason; observers can poll, await, or subscribe."""

    __slots__ = ("_callbacks", "_event", "_reason")

    def __init__(self) -> None:
        self._reason: BaseException | None = None
        self._event: asyncio.Event | None = None
        self._callbacks: list[AbortCallback] | None = None
        """Made by the first ``on_abort``: most signals (two a run) never get one."""

    @property
    def aborted(self) -> bool:
        return self._reason is not None

    @property
    def reason(self) -> BaseException | None:
        return self._reason

    def abort(self, reason: BaseException | None = None) -> bool:
        """Abort with ``reason`` (default ``X_ABORTED``); answers False if already aborted."""
        if self._reason is not None:
            return False
        self._reason = reason if reason is not None else JobAbortedError("the signal was aborted")
        if self._event is not None:
            self._event.set()
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            callback(self._reason)
        return True

    def throw_if_aborted(self) -> None:
        if self._reason is not None:
            raise self._reason

    async def wait(self) -> BaseException:
        """Wait until aborted; answers the reason."""
        if self._reason is None:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        assert self._reason is not None
        return self._reason

    def on_abort(self, callback: AbortCallback) -> Callable[[], None]:
        """Call ``callback(reason)`` once when aborted (at once if already); answers unsubscribe."""
        if self._reason is not None:
            callback(self._reason)
            return lambda: None
        if self._callbacks is None:
            self._callbacks = []
        self._callbacks.append(callback)

        def unsubscribe() -> None:
            callbacks = self._callbacks
            if callbacks is not None and callback in callbacks:
                callbacks.remove(callback)

        return unsubscribe

    @classmethod
    def any(cls, *parents: Signal) -> Signal:
        """A signal aborted as soon as any parent is, with that parent's reason."""
        child = cls()

        def forward(reason: BaseException) -> None:
            child.abort(reason)

        for parent in parents:
            parent.on_abort(forward)
        return child

    def abort_after(self, delay_ms: int, reason: BaseException) -> asyncio.TimerHandle:
        """Abort with ``reason`` after ``delay_ms``; cancel the returned handle to stop."""
        loop = asyncio.get_running_loop()
        return loop.call_later(max(delay_ms, 0) / 1000, self.abort, reason)

    def __repr__(self) -> str:
        return f"Signal(aborted={self.aborted}, reason={self._reason!r})"
