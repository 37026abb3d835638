"""The event bus ``step.wait_for_event`` listens on, and ``publish_event()``.

The bus has ONE clock: a stored bus stamps ``published_at`` and the expiry with the database's
``now()`` and ``bus.now()`` answers that same clock, so a worker whose clock runs ahead of the
database still matches an event published after it asked. An event stays matchable until it
expires, so tests reset the bus between them (``reset_event_bus()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

JSONValue = Any
Match = Mapping[str, Any] | Callable[[Any], bool]

DEFAULT_EVENT_TTL_MS = 7 * 86_400_000
EVENTS_PURGE_TARGET = "x_job_events"


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    name: str
    payload: JSONValue
    published_at_ms: int
    expires_at_ms: int


def matches(match: Match | None, payload: JSONValue) -> bool:
    """``match`` as a dict is a subset test on the payload (nested dicts too); as a function,
    its answer. None matches every payload."""
    if match is None:
        return True
    if callable(match):
        return bool(match(payload))
    return _contains(payload, match)


def _contains(payload: Any, expected: Any) -> bool:
    if isinstance(expected, Mapping):
        if not isinstance(payload, Mapping):
            return False
        return all(k in payload and _contains(payload[k], v) for k, v in expected.items())
    return bool(payload == expected)


@runtime_checkable
class EventBus(Protocol):
    async def publish(
        self, name: str, payload: JSONValue, *, ttl_ms: int | None = None
    ) -> EventRecord:
        """Store an event, stamped by the bus clock, matchable until it expires."""
        ...

    async def find(
        self, name: str, *, since_ms: int, match: Match | None = None
    ) -> EventRecord | None:
        """The earliest live event ``name`` published at or after ``since_ms`` that matches."""
        ...

    async def now(self) -> int:
        """The bus clock, epoch ms: the only clock a wait's start and timeout are read from."""
        ...

    async def purge_expired(self) -> int:
        """Delete expired events; answers how many rows were removed."""
        ...
