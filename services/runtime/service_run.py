"""One shape for every long-running service: config → logs → start → drain on SIGTERM → exit.

``run_service(common, start)`` is what ``ujobs api`` / ``worker`` / ``relay`` / ``scheduler``
/ ``dev`` do after building their config: JSON log lines labelled with the service, the
drain budget from ``UJOBS_DRAIN_DEADLINE_MS``, the event loop from ``UJOBS_EVENT_LOOP``
(``ujobs.services.runtime.event_loop``), SIGTERM/SIGINT handlers that run the process
lifecycle's drain (``ujobs.lifecycle``: every role's ``accept``, the in-flight work, every
``close``, one deadline), and the exit code: 0 after a clean drain, 1 when a role reports its
drain abandoned. ``start`` registers each role's hooks and returns; what it opened is closed by
the ``AsyncExitStack`` it is handed, after the drain.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field

import typer

from ujobs.clock import shift_system_clock
from ujobs.lifecycle import configure_lifecycle, process_lifecycle
from ujobs.services.config.settings import CommonConfig
from ujobs.services.runtime.event_loop import loop_in_use, resolve_event_loop, run_on
from ujobs.services.runtime.gc_tuning import tune_gc
from ujobs.services.runtime.logging import configure_logging
from ujobs.services.runtime.output import reported

log = logging.getLogger("ujobs.service")


@dataclass
class ServiceRun:
    """What ``start`` is handed: where to park cleanups, and how to report an abandoned drain."""

    common: CommonConfig
    stack: contextlib.AsyncExitStack
    checks: list[tuple[str, Callable[[], bool]]] = field(default_factory=list)

    def abandoned_if(self, name: str, check: Callable[[], bool]) -> None:
        """After the drain, ``check()`` true means ``name`` gave up on work: exit 1."""
        self.checks.append((name, check))


Start = Callable[[ServiceRun], Awaitable[None]]


def run_service(common: CommonConfig, start: Start, *, as_json: bool = False) -> None:
    """Run a service until SIGTERM/SIGINT has drained it; exits the process with its code."""
    configure_logging(common.service, common.log_level_number)
    with reported(as_json=as_json):
        configure_lifecycle(deadline_ms=common.drain_deadline_ms)
        if common.clock_offset_ms:
            shift_system_clock(common.clock_offset_ms)
            log.warning(
                "ujobs.service.clock-shifted",
                extra={"clock_offset_ms": common.clock_offset_ms},
            )
        code = run_on(resolve_event_loop(common.event_loop), _serve(common, start))
    raise typer.Exit(code=code)


async def _serve(common: CommonConfig, start: Start) -> int:
    lifecycle = process_lifecycle()
    remove_handlers = lifecycle.handle_signals()
    began = time.monotonic()
    try:
        async with contextlib.AsyncExitStack() as stack:
            run = ServiceRun(common=common, stack=stack)
            await start(run)
            gc_threshold = tune_gc(common.gc_threshold)[0]
            log.info(
                "ujobs.service.started",
                extra={
                    "drain_deadline_ms": common.drain_deadline_ms,
                    "gc_threshold": gc_threshold,
                    "event_loop": loop_in_use(),
                    "app": common.app,
                    **common.connections.public(),
                },
            )
            await lifecycle.wait_drained()
            abandoned = [name for name, check in run.checks if check()]
    finally:
        remove_handlers()
    code = 1 if abandoned else 0
    log.info(
        "ujobs.service.stopped",
        extra={
            "exit_code": code,
            "abandoned": abandoned,
            "ran_s": round(time.monotonic() - began, 3),
        },
    )
    return code
