"""What an idle loop needs from the wake, and how long it may sleep without one.

The worker (and the outbox relay) code against ``QueueWake`` only: a callback per announce and
a ``live`` flag. Which transport carries the announces — Redis pub/sub (``ujobs.wake.listener``'s
``redis_wake``, the default) or Postgres LISTEN/NOTIFY (``postgres_wake``) — is the boot's
choice, so this module imports neither.

A wake is a hint, never the guarantee: a notification is lost with the session that would have
carried it, so every loop still polls. What a PROVEN wake buys is a longer idle ceiling —
``idle_ceiling_ms`` — because a loop that will be told about new work can afford to ask less
often: 12 claims per idle minute instead of 30.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from ujobs.errors import ConfigInvalidError

WAKE_SLOT_MS = 250
"""A Postgres enqueue ``pg_notify``s its queue at most once per slot of this width (per queue).
The throttle exists because Postgres serialises the commit of every transaction that issued a
``NOTIFY`` behind one lock held through its WAL flush: one NOTIFY per enqueue would cap
enqueuing commits at one flush at a time."""
REDIS_WAKE_SLOT_MS = 10
"""A Redis announce (``PUBLISH`` of the queue name) goes out at most once per queue per slot of
this width. A ``PUBLISH`` takes no lock in anyone's commit, so the 250 ms ``NOTIFY`` slot's reason
does not apply; the throttle here only bounds the channel's traffic (at most 100 messages a
second per queue per process). A slot this narrow is what makes pickup latency the wake's own:
with 250 ms slots, jobs 50 ms apart are four in five announced by nobody and wait for the woken
loop's next pass (bench/RESULTS.md has the pickup latency of both widths)."""
WAKE_DUE_WITHIN_MS = 1_000
"""Only a row due within this much of now is announced; a later one starts on the poll."""
IDLE_POLL_CEILING_MS = 2_000
"""The idle wait's ceiling while no wake is proven: a job another process queued starts
within this, whatever happened to the wake."""
WOKEN_IDLE_POLL_CEILING_MS = 5_000
"""The idle wait's ceiling while the wake is live (a probe came back)."""

WakeCallback = Callable[[str], None]
"""Called with the payload of one announce — for the jobs channel, a queue name. It runs on the
event loop in the wake's own task, so it must only schedule work (set an event), never block."""


@runtime_checkable
class QueueWake(Protocol):
    """Announces of "a row is due on this queue", from other processes."""

    def subscribe(self, callback: WakeCallback) -> Callable[[], None]:
        """Call ``callback(queue)`` on every announce from now on; answers unsubscribe."""
        ...

    @property
    def live(self) -> bool:
        """True only while a probe sent through the publishing path came back on the
        subscription: the channel is proven to carry announces. False before the first proof,
        after a lost session until a new probe proves the re-dialled one, and for a setup
        that never delivers (a transaction-pooling proxy, a wrong URL)."""
        ...


def idle_ceiling_ms(wake: QueueWake | None, declared: int | None = None) -> int:
    """The ceiling an idle loop's doubling wait stops at.

    ``declared`` (``idle_poll_max_ms``) wins either way. Otherwise 5 s while ``wake`` is live,
    2 s without a wake or while it is unproven: a wake nobody proved may be silently deaf, and
    the poll is what still starts the job.
    """
    if declared is not None:
        if isinstance(declared, bool) or not isinstance(declared, int) or declared < 1:
            raise ConfigInvalidError(
                "idle_poll_max_ms must be a whole number of milliseconds, at least 1",
                meta={"idle_poll_max_ms": declared},
            )
        return declared
    if wake is not None and wake.live:
        return WOKEN_IDLE_POLL_CEILING_MS
    return IDLE_POLL_CEILING_MS
