"""The scheduler's view of its own leadership: when to ask, and whether it still leads.

It asks the ``Leader`` every ``renew_every_ms`` — leader and standby alike, never every round —
and counts the lease as held for ``ttl_ms`` from the START of the last ``acquire()`` that
landed. A renewal that raises (the store went away) is retried next round; once a whole TTL has
passed with none landing, the node stops leading on its own, because by then another node may
hold the lease.
"""

from __future__ import annotations

import logging
import math
from typing import Literal

from ujobs.scheduler.leader import Leader

log = logging.getLogger("ujobs.scheduler")

Change = Literal["gained", "lost", "lapsed"]


class Leadership:
    def __init__(self, leader: Leader) -> None:
        self.leader = leader
        self.leading = False
        self.next_acquire_at: float = -math.inf
        self._lease_until: int | None = None

    async def check(self, now: int) -> Change | None:
        """Ask the leader if it is time to; answer what changed. ``gained`` is only a lease:
        the caller becomes the leader with ``confirm()`` once it has read its state."""
        change: Change | None = None
        if now >= self.next_acquire_at:
            try:
                held = await self.leader.acquire()
            except Exception as exc:
                log.warning("jobs.scheduler.lease-failed", extra={"error": repr(exc)})
                self.next_acquire_at = now  # ask again next round
            else:
                self.next_acquire_at = now + self.leader.renew_every_ms
                if held:
                    ttl = self.leader.ttl_ms
                    self._lease_until = now + ttl if ttl is not None else None
                    if not self.leading:
                        change = "gained"
                elif self.leading:
                    self.step_down()
                    return "lost"
        if self.leading and self._lease_until is not None and now >= self._lease_until:
            self.step_down()
            return "lapsed"
        return change

    def confirm(self) -> None:
        self.leading = True

    def retry(self, now: int) -> None:
        """Ask again next round (the lease was taken but the state could not be read)."""
        self.next_acquire_at = now

    def step_down(self) -> None:
        """Stop counting as the leader (demoted, lapsed, or drained)."""
        self.leading = False
        self._lease_until = None
