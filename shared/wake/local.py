"""The in-process wake: an enqueue made in THIS process wakes this process's loops at once.

A direct enqueue, the relay's publish and the scheduler's fire all happen in a process that may
also run workers; telling those workers needs no network hop and no throttle, only a function
call. ``announcing()`` (``ujobs.wake.announce``) calls ``signal_enqueued`` after every enqueue
that created a row due within ``WAKE_DUE_WITHIN_MS``; a worker registers with
``on_enqueued``. With the memory driver this is the whole wake.

Callbacks run synchronously inside the enqueuing call, on its event loop: they must only
schedule work (set an ``asyncio.Event``), never await or block. One that raises is logged and
skipped, so a broken listener can never fail an enqueue.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from ujobs.wake.protocol import WakeCallback

log = logging.getLogger("ujobs.wake")

_callbacks: list[WakeCallback] = []


def on_enqueued(callback: WakeCallback) -> Callable[[], None]:
    """Call ``callback(queue)`` whenever this process enqueues a due row; answers unsubscribe
    (safe to call twice)."""
    _callbacks.append(callback)

    def unsubscribe() -> None:
        if callback in _callbacks:
            _callbacks.remove(callback)

    return unsubscribe


def signal_enqueued(queue: str) -> None:
    """Tell this process's listeners that ``queue`` gained a row due now (the enqueue path
    calls this after its commit)."""
    for callback in list(_callbacks):
        try:
            callback(queue)
        except Exception:
            log.exception("jobs.wake.callback-failed", extra={"queue": queue, "local": True})


def listener_count() -> int:
    """How many listeners are registered (for tests and diagnostics)."""
    return len(_callbacks)
