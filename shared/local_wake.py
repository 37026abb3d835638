"""The in-process wake: an enqueue made in THIS process announces its queue to this process's
workers at once (``signal_enqueued``), with no channel and no round trip.

It is the whole wake for the memory driver (one process), and the fast path beside the Redis /
Postgres wake for everything else: a direct enqueue, the relay's publish or the scheduler's
fire starts on a local worker without waiting for the channel. Callbacks run synchronously
and must not block (the worker's only sets a flag); one that raises is logged and skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

log = logging.getLogger("ujobs.wake")

_listeners: list[Callable[[str], None]] = []


def on_enqueued(callback: Callable[[str], None]) -> Callable[[], None]:
    """Call ``callback(queue)`` for every ``signal_enqueued``; answers unsubscribe (safe twice)."""
    _listeners.append(callback)

    def unsubscribe() -> None:
        if callback in _listeners:
            _listeners.remove(callback)

    return unsubscribe


def signal_enqueued(queue: str) -> None:
    """Announce that ``queue`` has a row due now (the enqueue path calls this after its commit)."""
    for callback in list(_listeners):
        try:
            callback(queue)
        except Exception:
            log.exception("jobs.wake.listener-failed", extra={"queue": queue})


def listener_count() -> int:
    return len(_listeners)
