"""``Role``: the one start/stop/drain shape of every long-running loop (worker, scheduler, relay).

A role's ``phase`` goes ``new`` → ``running`` → ``draining`` → ``stopped``:

* ``start()`` checks what must hold before anything runs (``_before_start``; it may refuse),
  registers the role's pair of hooks with its lifecycle (``ujobs.lifecycle``; unless the role
  was built with ``drain_on_shutdown=False``), and starts the loop (``_begin``). A second call
  does nothing.
* ``accept`` (the lifecycle's first phase, or ``drain()``) stops taking work (``_halt``) and
  then tells the work in flight to wind down (``_on_drain``: the worker aborts its runs with
  ``X_DRAINING``); it returns at once.
* ``close(deadline)`` (the second phase) and ``stop(deadline)`` stop taking work and join the
  wind-down (``_wind_down``), which reads ``self.deadline`` for its budget. ``stop()`` aborts
  nothing, and with no deadline waits however long the work takes.
* ``drain(deadline)`` is both phases for this role alone: what SIGTERM does to it.

The deadline binds LATE: the wind-down runs once, and every later caller (a shutdown landing
on a manual ``stop()``) joins it, the EARLIEST deadline winning; ``within_deadline`` waits
for a task and notices a deadline that moved during the wait. All of it is safe twice, and
before ``start()``.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from typing import Any, Literal

from ujobs.lifecycle import Deadline, Lifecycle, process_lifecycle

RolePhase = Literal["new", "running", "draining", "stopped"]

NO_DEADLINE = Deadline(math.inf)

__all__ = ["NO_DEADLINE", "Role", "RolePhase"]


class Role:
    """The base of ``JobWorker``, ``JobScheduler`` and ``OutboxRelay`` (see the module doc).

    A subclass writes ``_begin`` and ``_wind_down``, and where it needs them ``_before_start``,
    ``_halt``, ``_on_drain`` and ``_on_stopped``; it adds what to undo at the end with
    ``on_stop(undo)``.
    """

    role_name = "role"

    def __init__(self, *, lifecycle: Lifecycle | None, drain_on_shutdown: bool = True) -> None:
        self._lifecycle = lifecycle
        self._drain_on_shutdown = drain_on_shutdown
        self._phase: RolePhase = "new"
        self._undo: list[Callable[[], None]] = []
        self._deadline = NO_DEADLINE
        self._deadline_moved = asyncio.Event()
        self._closing: asyncio.Task[None] | None = None

    # -- what a subclass writes -------------------------------------------------------------

    def _before_start(self) -> None:
        """What must hold before the role runs; raise to refuse the start."""

    async def _begin(self) -> None:
        """Start the loop (the hooks are registered already)."""
        raise NotImplementedError

    def _halt(self) -> None:
        """Stop taking work: no pass, round or claim starts after the one in flight."""

    def _on_drain(self) -> None:
        """The drain's own signal to the work in flight (after ``_halt``)."""

    async def _wind_down(self) -> None:
        """Wait out the work in flight within ``self.deadline`` and close what the role holds."""
        raise NotImplementedError

    def _on_stopped(self) -> None:
        """Stopped: log it, emit it."""

    # -- state ------------------------------------------------------------------------------

    @property
    def phase(self) -> RolePhase:
        return self._phase

    @property
    def stopping(self) -> bool:
        """Whether the drain (or a stop) began: no new work starts."""
        return self._phase in ("draining", "stopped")

    @property
    def lifecycle(self) -> Lifecycle:
        """The lifecycle the role drains with: the one it was given, else the process's."""
        if self._lifecycle is None:
            self._lifecycle = process_lifecycle()
        return self._lifecycle

    @property
    def drains_with_lifecycle(self) -> bool:
        return self._drain_on_shutdown

    @property
    def deadline(self) -> Deadline:
        """The wind-down's budget: the earliest deadline any caller gave (none: infinite)."""
        return self._deadline

    def on_stop(self, undo: Callable[[], None]) -> None:
        """Call ``undo`` when the role stops (in reverse order of registration)."""
        self._undo.append(undo)

    # -- start --------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start the role; a second call does nothing."""
        if self._phase != "new":
            return
        self._before_start()
        self._phase = "running"
        if self._drain_on_shutdown:
            self.on_stop(
                self.lifecycle.register(accept=self._accept, close=self._close, name=self.hook_name)
            )
        await self._begin()

    @property
    def hook_name(self) -> str:
        return self.role_name

    # -- the drain ----------------------------------------------------------------------------

    def _stop_taking(self) -> None:
        if self._phase == "running":
            self._phase = "draining"
            self._halt()

    def _accept(self) -> None:
        """The lifecycle's first phase: stop taking work, signal the work in flight."""
        self._stop_taking()
        if self._phase != "stopped":
            self._on_drain()

    async def _close(self, deadline: Deadline) -> None:
        """The lifecycle's second phase: the wind-down, within ``deadline``."""
        self._stop_taking()
        await self._join(deadline)

    async def stop(self, deadline: Deadline | None = None) -> None:
        """Stop taking work and join the wind-down, aborting nothing; with no ``deadline``,
        however long the work takes (unless a shutdown's lands meanwhile: the earliest wins).
        Safe twice, and before ``start()``."""
        if self._phase == "new":
            return
        self._stop_taking()
        await self._join(deadline)

    async def drain(self, deadline: Deadline | None = None) -> None:
        """Both phases of a shutdown for this role alone (default budget: its lifecycle's)."""
        if self._phase == "new":
            return
        self._accept()
        await self._close(deadline or Deadline.after_ms(self.lifecycle.deadline_ms))

    async def _join(self, deadline: Deadline | None) -> None:
        if self._phase == "new":
            return
        if deadline is not None and deadline.at < self._deadline.at:
            self._deadline = deadline
            self._deadline_moved.set()
        if self._closing is None:
            self._closing = asyncio.ensure_future(self._finish())
        await asyncio.shield(self._closing)

    async def _finish(self) -> None:
        try:
            await self._wind_down()
        finally:
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()
            self._phase = "stopped"
        self._on_stopped()

    # -- helpers for the wind-down --------------------------------------------------------------

    def remaining_s(self) -> float | None:
        """Seconds left of the deadline (None: no deadline)."""
        return None if math.isinf(self._deadline.at) else self._deadline.remaining_s()

    async def within_deadline(self, task: asyncio.Future[Any]) -> bool:
        """Wait for ``task`` until the deadline, noticing a deadline that moves meanwhile;
        answers whether it finished."""
        while not task.done():
            self._deadline_moved.clear()
            moved = asyncio.ensure_future(self._deadline_moved.wait())
            done, _ = await asyncio.wait(
                {task, moved}, timeout=self.remaining_s(), return_when=asyncio.FIRST_COMPLETED
            )
            moved.cancel()
            await asyncio.wait({moved})
            if not done:
                return False
        return True
