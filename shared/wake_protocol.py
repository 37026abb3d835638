"""The wake as the worker sees it: a feed of queue names, and whether it is proven live.

``shared.wake`` implements it (the Redis channel ``ujobs:wake`` by default, Postgres
LISTEN/NOTIFY as the alternative); the worker codes against this Protocol only, so a test or
another transport can stand in. A wake is a hint, never the guarantee: the poll still runs, and
a worker whose wake is not ``live`` keeps the 2 s idle ceiling
(``IDLE_POLL_CEILING_MS``); a proven one lets it rise to ``WOKEN_IDLE_POLL_CEILING_MS`` (5 s).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

IDLE_POLL_CEILING_MS = 2_000
"""The idle loop's ceiling with no proven wake: the no-wake pickup bound."""
WOKEN_IDLE_POLL_CEILING_MS = 5_000
"""The idle loop's ceiling while the wake is proven live (a probe it published came back)."""


@runtime_checkable
class QueueWake(Protocol):
    """Announcements that a queue has work, from any process."""

    def subscribe(self, callback: Callable[[str], None]) -> Callable[[], None]:
        """Call ``callback(queue)`` for every announcement (on the event loop, never blocking);
        answers the function that unsubscribes (safe twice)."""
        ...

    @property
    def live(self) -> bool:
        """True once a probe sent through the channel came back on this subscription (and
        until the connection is lost)."""
        ...
