"""Fleet slots in memory: the twin of ``x_job_leases`` (one row per held slot).

A key has numbered slots; a holder takes the lowest free one, so ``holders(key)`` answers in
slot order (the order the slots were filled, for as long as they stay held). A slot whose TTL
passed is free for the next acquire with no cleanup call — that is how a SIGKILLed worker's
slot comes back.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass

from ujobs.clock import Clock
from ujobs.errors import InvariantError


@dataclass(slots=True)
class _Slot:
    holder: str
    expires_at_ms: int


def _check(key: str, holder: str, ttl_ms: int) -> None:
    if not isinstance(key, str) or not key:
        raise InvariantError("a lease needs a non-empty key", meta={"key": key})
    if not isinstance(holder, str) or not holder:
        raise InvariantError("a lease needs a non-empty holder", meta={"holder": holder})
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
        raise InvariantError("a lease TTL is a whole number of ms, 1 or more", meta={"ttl": ttl_ms})


class MemoryLeaseStore:
    """``LeaseStore`` over a dict of key -> slot number -> holder."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._slots: dict[str, dict[int, _Slot]] = {}

    def _live(self, key: str, now: int) -> dict[int, _Slot]:
        """The key's slots with every lapsed one reclaimed (the TTL reclaim)."""
        slots = self._slots.get(key, {})
        for number in [n for n, s in slots.items() if s.expires_at_ms <= now]:
            del slots[number]
        if not slots:
            self._slots.pop(key, None)
        return slots

    async def acquire(self, key: str, holder: str, limit: int, ttl_ms: int) -> bool:
        """Take a slot when fewer than ``limit`` live holders share ``key``.

        A holder that already holds a live slot of the key keeps it (its TTL is renewed) and
        answers True: acquiring twice never takes two slots.
        """
        _check(key, holder, ttl_ms)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise InvariantError(
                "a lease limit is a whole number, 1 or more", meta={"limit": limit}
            )
        now = self._clock.now_ms()
        slots = self._live(key, now)
        for slot in slots.values():
            if slot.holder == holder:
                slot.expires_at_ms = now + ttl_ms
                return True
        if len(slots) >= limit:
            return False
        number = next(n for n in range(len(slots) + 1) if n not in slots)
        self._slots.setdefault(key, slots)[number] = _Slot(holder, now + ttl_ms)
        return True

    async def renew(self, key: str, holder: str, ttl_ms: int) -> bool:
        """Extend a live slot; a lapsed one is gone (another may hold it): False."""
        _check(key, holder, ttl_ms)
        now = self._clock.now_ms()
        for slot in self._live(key, now).values():
            if slot.holder == holder:
                slot.expires_at_ms = now + ttl_ms
                return True
        return False

    async def release(self, key: str, holder: str) -> None:
        self.drop(key, holder)

    def drop(self, key: str, holder: str) -> None:
        """``release`` without a turn of the loop: the driver's settle frees the run's slot in
        the same step as the row (``MemoryDriver.ack`` / ``nack`` ``slot``)."""
        slots = self._slots.get(key, {})
        for number in [n for n, s in slots.items() if s.holder == holder]:
            del slots[number]
        if not slots:
            self._slots.pop(key, None)

    async def holders(self, key: str) -> builtins.list[str]:
        slots = self._live(key, self._clock.now_ms())
        return [slots[n].holder for n in sorted(slots)]
