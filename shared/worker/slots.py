"""The worker's in-flight accounting: per-queue pools under one optional process cap.

A run holds one slot of its queue's pool (``concurrency``) and one of the process cap
(``max_in_flight``) from the moment it is claimed until its settle is SENT (its body is over;
see ``claimed_run``) — or, for a run that never settles, until its ``finally``. The claim
loop reads ``room()`` and ``free(queue)`` BEFORE it claims, so a worker at the cap asks the
queue for nothing and no row is claimed only to be shed.
"""

from __future__ import annotations

from collections.abc import Mapping


class Slots:
    """Counts of runs held, per queue and in total."""

    __slots__ = ("_cap", "_free", "_held", "_pools", "in_flight")

    def __init__(self, pools: Mapping[str, int], max_in_flight: int | None) -> None:
        self._pools = dict(pools)
        self._cap = max_in_flight
        self._held: dict[str, int] = dict.fromkeys(self._pools, 0)
        self._free = sum(max(0, size) for size in self._pools.values())
        """The pools' free slots summed (a pool held past its size counts 0): kept by
        ``take`` and ``give``, since ``room()`` is read twice a run."""
        self.in_flight = 0

    @property
    def max_in_flight(self) -> int | None:
        return self._cap

    @property
    def capacity(self) -> int:
        """The tighter of the cap and the sum of the pools."""
        total = sum(self._pools.values())
        return total if self._cap is None else min(self._cap, total)

    def free(self, queue: str) -> int:
        """Slots of ``queue``'s pool not held (ignores the cap)."""
        return self._pools.get(queue, 0) - self._held.get(queue, 0)

    def room(self) -> int:
        """How many more runs may be claimed now, across every queue."""
        if self._cap is None:
            return self._free
        return max(0, min(self._free, self._cap - self.in_flight))

    def can_take(self, queue: str) -> bool:
        """``free(queue) > 0 and room() > 0`` in one call: asked for every row dispatched and
        every buffered row fed."""
        if self._pools.get(queue, 0) - self._held.get(queue, 0) <= 0:
            return False
        if self._cap is None:
            return self._free > 0
        return min(self._free, self._cap - self.in_flight) > 0

    def held(self, queue: str) -> int:
        return self._held.get(queue, 0)

    def take(self, queue: str) -> None:
        held = self._held.get(queue, 0)
        if held < self._pools.get(queue, 0):
            self._free -= 1
        self._held[queue] = held + 1
        self.in_flight += 1

    def give(self, queue: str) -> None:
        held = self._held.get(queue, 0)
        if held > 0:
            self._held[queue] = held - 1
            if held <= self._pools.get(queue, 0):
                self._free += 1
        else:
            self._held[queue] = 0
        self.in_flight = max(0, self.in_flight - 1)

    def by_queue(self) -> dict[str, int]:
        return dict(self._held)
