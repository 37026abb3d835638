"""Shutdown in two phases, shared by every role (worker, scheduler, outbox relay, ...).

A role registers a PAIR of hooks. ``accept`` stops taking work and returns at once; ``close``
waits out the work in flight and closes what the role holds, bounded by the drain deadline
(``configure_lifecycle(deadline_ms=...)``, default 25 s). ``drain()`` runs EVERY ``accept``
first, then waits for the work counted with ``begin_work()``, then every ``close`` at once —
so no role's "stop taking work" is queued behind another role's wait, and the whole drain
spends one budget, not one per role.

Nothing can kill a coroutine that ignores cancellation, so the deadline is the budget each
``close`` is told and is expected to honour (the scheduler logs
``jobs.scheduler.drain-abandoned`` and returns); a hook still running a grace period past it is
cancelled and logged ``jobs.lifecycle.close-abandoned``. Raise the budget past your slowest job
rather than relying on the wait, with a ``terminationGracePeriodSeconds`` at least as large.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import itertools
import logging
import signal
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

from ujobs.errors import ConfigInvalidError

log = logging.getLogger("ujobs.lifecycle")

DEFAULT_DRAIN_DEADLINE_MS = 25_000
CLOSE_GRACE_MS = 1_000
"""How long past the deadline a ``close`` hook may run before it is cancelled."""


@dataclass(frozen=True, slots=True)
class Deadline:
    """An instant on the monotonic clock a drain must be done by."""

    at: float

    @classmethod
    def after_ms(cls, ms: int) -> Deadline:
        return cls(time.monotonic() + ms / 1000)

    def remaining_s(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def passed(self) -> bool:
        return time.monotonic() >= self.at


AcceptHook = Callable[[], Awaitable[None] | None]
CloseHook = Callable[[Deadline], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class _Hooks:
    id: int
    name: str
    accept: AcceptHook | None
    close: CloseHook | None


class Lifecycle:
    """The hooks of one process and the drain that runs them (``process_lifecycle()``)."""

    def __init__(self, *, deadline_ms: int = DEFAULT_DRAIN_DEADLINE_MS) -> None:
        self.deadline_ms = _valid_deadline(deadline_ms)
        self._hooks: dict[int, _Hooks] = {}
        self._ids = itertools.count(1)
        self._in_flight = 0
        self._idle: asyncio.Event | None = None
        self._drain: asyncio.Task[None] | None = None
        self._drained: asyncio.Event | None = None
        self.last_signal: str | None = None
        """The name of the signal that started the drain (``SIGTERM``), for roles that name it."""

    # -- registration ----------------------------------------------------------------------

    def register(
        self, *, accept: AcceptHook | None = None, close: CloseHook | None = None, name: str = ""
    ) -> Callable[[], None]:
        """Add a pair of hooks; answers the function that removes them (safe to call twice)."""
        hook_id = next(self._ids)
        self._hooks[hook_id] = _Hooks(hook_id, name, accept, close)

        def unregister() -> None:
            self._hooks.pop(hook_id, None)

        return unregister

    @property
    def hook_count(self) -> int:
        return len(self._hooks)

    # -- in-flight work ----------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def begin_work(self) -> AsyncIterator[None]:
        """Count one unit of work in flight, so ``drain()`` waits for it between its phases."""
        self.work_started()
        try:
            yield
        finally:
            self.work_finished()

    def work_started(self) -> None:
        """``begin_work`` without the context manager, for a hot path (the worker, per run):
        every call must be paired with ``work_finished()``."""
        self._in_flight += 1
        if self._idle is not None:
            self._idle.clear()

    def work_finished(self) -> None:
        self._in_flight -= 1
        if self._in_flight == 0 and self._idle is not None:
            self._idle.set()

    @property
    def in_flight(self) -> int:
        return self._in_flight

    # -- the drain ---------------------------------------------------------------------------

    @property
    def draining(self) -> bool:
        return self._drain is not None

    async def drain(self, deadline_ms: int | None = None) -> None:
        """accept → in-flight work → close, within one deadline. A second call (a second
        SIGTERM) joins the drain already running instead of starting another."""
        if self._drain is None:
            budget = self.deadline_ms if deadline_ms is None else _valid_deadline(deadline_ms)
            if self._drained is None:
                self._drained = asyncio.Event()
            self._drain = asyncio.ensure_future(self._run(Deadline.after_ms(budget)))
        await asyncio.shield(self._drain)

    async def wait_drained(self) -> None:
        """Resolve once a drain has finished (a service's main waits here after ``start()``)."""
        if self._drained is None:
            self._drained = asyncio.Event()
        await self._drained.wait()

    async def _run(self, deadline: Deadline) -> None:
        hooks = list(self._hooks.values())
        log.info(
            "jobs.lifecycle.draining",
            extra={"hooks": len(hooks), "deadline_ms": int(deadline.remaining_s() * 1000)},
        )
        try:
            for hook in hooks:
                if hook.accept is not None:
                    await self._accept(hook)
            await self._wait_in_flight(deadline)
            await self._close_all([h for h in hooks if h.close is not None], deadline)
        finally:
            log.info("jobs.lifecycle.drained", extra={"hooks": len(hooks)})
            assert self._drained is not None
            self._drained.set()

    async def _accept(self, hook: _Hooks) -> None:
        assert hook.accept is not None
        try:
            result = hook.accept()
            if inspect.isawaitable(result):
                await result
        except Exception as exc:
            log.exception("jobs.lifecycle.accept-failed", extra={"hook": hook.name, "error": exc})

    async def _wait_in_flight(self, deadline: Deadline) -> None:
        if self._in_flight == 0:
            return
        self._idle = asyncio.Event()
        try:
            await asyncio.wait_for(self._idle.wait(), deadline.remaining_s())
        except TimeoutError:
            log.warning("jobs.lifecycle.in-flight-abandoned", extra={"in_flight": self._in_flight})

    async def _close_all(self, hooks: Sequence[_Hooks], deadline: Deadline) -> None:
        if not hooks:
            return
        tasks = {asyncio.ensure_future(self._close(h, deadline)): h for h in hooks}
        _, pending = await asyncio.wait(
            tasks, timeout=deadline.remaining_s() + CLOSE_GRACE_MS / 1000
        )
        for task in pending:
            log.error("jobs.lifecycle.close-abandoned", extra={"hook": tasks[task].name})
            task.cancel()
        if pending:
            await asyncio.wait(pending)

    async def _close(self, hook: _Hooks, deadline: Deadline) -> None:
        assert hook.close is not None
        try:
            await hook.close(deadline)
        except Exception as exc:
            log.exception("jobs.lifecycle.close-failed", extra={"hook": hook.name, "error": exc})

    # -- signals ------------------------------------------------------------------------------

    def handle_signals(
        self,
        signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Callable[[], None]:
        """Drain on SIGTERM / SIGINT on the running loop; answers the function that removes the
        handlers. A second signal joins the drain in flight."""
        target = loop or asyncio.get_running_loop()
        pending: set[asyncio.Task[None]] = set()

        def on_signal(signum: signal.Signals) -> None:
            log.info("jobs.lifecycle.signal", extra={"signal": signum.name})
            if self.last_signal is None:
                self.last_signal = signum.name
            task = target.create_task(self.drain())
            pending.add(task)
            task.add_done_callback(pending.discard)

        for signum in signals:
            target.add_signal_handler(signum, on_signal, signum)

        def remove() -> None:
            for signum in signals:
                target.remove_signal_handler(signum)

        return remove


def _valid_deadline(deadline_ms: int) -> int:
    if isinstance(deadline_ms, bool) or not isinstance(deadline_ms, int) or deadline_ms < 0:
        raise ConfigInvalidError(
            f"the drain deadline must be a whole number of milliseconds, 0 or more; got "
            f"{deadline_ms!r}",
            meta={"option": "deadline_ms"},
        )
    return deadline_ms


_process = Lifecycle()


def process_lifecycle() -> Lifecycle:
    """The process's lifecycle: what the services' signal handlers drain."""
    return _process


def reset_lifecycle() -> None:
    """Test seam: a fresh process lifecycle (no hooks, default deadline)."""
    global _process
    _process = Lifecycle()


def configure_lifecycle(*, deadline_ms: int) -> None:
    """Set the drain budget every ``close`` hook is bounded by (default 25 s)."""
    _process.deadline_ms = _valid_deadline(deadline_ms)


def register_shutdown_hooks(
    *, accept: AcceptHook | None = None, close: CloseHook | None = None, name: str = ""
) -> Callable[[], None]:
    """Register a role's pair of hooks with the process lifecycle; answers ``unregister``."""
    return _process.register(accept=accept, close=close, name=name)


def begin_work() -> contextlib.AbstractAsyncContextManager[None]:
    """``async with begin_work():`` counts work the process drain waits for."""
    return _process.begin_work()


async def drain(deadline_ms: int | None = None) -> None:
    """Drain the process: every accept, the in-flight work, every close, one deadline."""
    await _process.drain(deadline_ms)


def handle_signals(
    signals: Sequence[signal.Signals] = (signal.SIGTERM, signal.SIGINT),
) -> Callable[[], None]:
    """Drain the process lifecycle on SIGTERM / SIGINT on the running loop."""
    return _process.handle_signals(signals)


async def wait_drained() -> None:
    await _process.wait_drained()
