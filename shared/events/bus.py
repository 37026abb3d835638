"""The event bus ``step.wait_for_event`` listens on, and ``publish_event()``.

An event carries the tenant it was published for: ``None`` (an operator, a script acting for
no tenant, a ``tenant='none'`` job) reaches every waiter; a tenant's reaches only the waits of
that tenant's jobs (``reaches``). The api publishes under the token's tenant, so a tenant
token cannot resume another tenant's ``wait_for_event``; ``publish_event()`` publishes under
the acting tenant (a job body's is its job's) unless told otherwise.

The bus has ONE clock: a stored bus stamps ``published_at`` and the expiry with the database's
``now()`` and ``bus.now()`` answers that same clock, so a worker whose clock runs ahead of the
database still matches an event published after it asked. An event stays matchable until it
expires, so tests reset the bus between them (``reset_event_bus()``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from enum import Enum
from typing import Any, Protocol, runtime_checkable

import orjson

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.context import current_tenant
from ujobs.errors import InputInvalidError, InvariantError
from ujobs.ids import new_id
from ujobs.limits import MAX_EVENT_NAME_BYTES, depth_refused, json_depth_over, text_problem

JSONValue = Any
Match = Mapping[str, Any] | Callable[[Any], bool]

DEFAULT_EVENT_TTL_MS = 7 * 86_400_000
EVENTS_PURGE_TARGET = "x_job_events"
MAX_EVENT_NAME_LENGTH = MAX_EVENT_NAME_BYTES


@dataclass(frozen=True, slots=True)
class EventRecord:
    id: str
    name: str
    payload: JSONValue
    published_at_ms: int
    expires_at_ms: int
    tenant: str | None = None
    """The publisher's tenant; None reaches every tenant's waiters."""


def reaches(event_tenant: str | None, waiter_tenant: str | None) -> bool:
    """Whether an event published for ``event_tenant`` may resume a wait of a job of
    ``waiter_tenant``: an event of no tenant reaches everyone, a tenant's only its own."""
    return event_tenant is None or event_tenant == waiter_tenant


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
        self,
        name: str,
        payload: JSONValue,
        *,
        ttl_ms: int | None = None,
        tenant: str | None = None,
    ) -> EventRecord:
        """Store an event for ``tenant`` (None: every tenant), stamped by the bus clock,
        matchable until it expires."""
        ...

    async def find(
        self,
        name: str,
        *,
        since_ms: int,
        match: Match | None = None,
        tenant: str | None = None,
    ) -> EventRecord | None:
        """The earliest live event ``name`` published at or after ``since_ms`` that matches
        and ``reaches`` a waiter of ``tenant``."""
        ...

    async def now(self) -> int:
        """The bus clock, epoch ms: the only clock a wait's start and timeout are read from."""
        ...

    async def purge_expired(self) -> int:
        """Delete expired events; answers how many rows were removed."""
        ...


# --- the memory bus and the process's installed bus ---------------------------------------


class MemoryEventBus:
    """Events in one process's heap, stamped by ``clock`` — the bus's one clock.

    ``x dev`` and tests use it; a fleet uses the Postgres bus (``ujobs.events.bus_postgres``),
    whose clock is the database's. Payloads are stored as JSON (an equal, independent copy),
    so a publisher mutating its dict afterwards cannot change what a wait receives.
    """

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, ttl_ms: int = DEFAULT_EVENT_TTL_MS) -> None:
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
            raise InvariantError("an event bus ttl_ms must be a whole number of at least 1")
        self.clock = clock
        self.ttl_ms = ttl_ms
        self._events: list[EventRecord] = []

    async def publish(
        self,
        name: str,
        payload: JSONValue,
        *,
        ttl_ms: int | None = None,
        tenant: str | None = None,
    ) -> EventRecord:
        validate_event_name(name)
        stored = json_payload(name, payload)
        ttl = self.ttl_ms if ttl_ms is None else ttl_ms
        if isinstance(ttl, bool) or not isinstance(ttl, int) or ttl < 1:
            raise InvariantError("an event's ttl_ms must be a whole number of at least 1")
        now = self.clock.now_ms()
        record = EventRecord(
            id=new_id(),
            name=name,
            payload=stored,
            published_at_ms=now,
            expires_at_ms=now + ttl,
            tenant=tenant,
        )
        self._events.append(record)
        return _copy(record)

    async def find(
        self,
        name: str,
        *,
        since_ms: int,
        match: Match | None = None,
        tenant: str | None = None,
    ) -> EventRecord | None:
        now = self.clock.now_ms()
        # Publish order is stamp order on one clock; ties keep the order they were published.
        for record in self._events:
            if record.name != name or record.published_at_ms < since_ms:
                continue
            if record.expires_at_ms <= now or not reaches(record.tenant, tenant):
                continue
            candidate = _copy(record)
            if matches(match, candidate.payload):
                return candidate
        return None

    async def now(self) -> int:
        return self.clock.now_ms()

    async def purge_expired(self) -> int:
        now = self.clock.now_ms()
        kept = [r for r in self._events if r.expires_at_ms > now]
        removed = len(self._events) - len(kept)
        self._events = kept
        return removed

    def __repr__(self) -> str:
        return f"MemoryEventBus(events={len(self._events)}, clock={self.clock!r})"


def memory_event_bus(
    *, clock: Clock = SYSTEM_CLOCK, ttl_ms: int = DEFAULT_EVENT_TTL_MS
) -> MemoryEventBus:
    """A fresh in-process bus whose clock is ``clock``."""
    return MemoryEventBus(clock=clock, ttl_ms=ttl_ms)


def validate_event_name(name: Any) -> str:
    problem = text_problem(name, MAX_EVENT_NAME_LENGTH)
    if problem is not None:
        raise InvariantError(
            f"an event name {problem} (at most {MAX_EVENT_NAME_LENGTH} bytes of UTF-8), "
            f"got {name!r}",
        )
    assert isinstance(name, str)
    return name


def json_payload(name: str, payload: JSONValue) -> JSONValue:
    """The payload as it will be stored; one JSON cannot carry is refused, never altered,
    and one nested past ``MAX_JSON_DEPTH`` is refused before orjson walks it."""
    if json_depth_over(payload):
        raise depth_refused(f"event {name!r}: the payload", "payload")
    try:
        return orjson.loads(orjson.dumps(payload))
    except TypeError as exc:
        raise InputInvalidError(
            f"event {name!r}: the payload is not JSON ({exc}); publish dicts, lists, strings, "
            "numbers, booleans and None",
            meta={"event": name},
        ) from None


def _copy(record: EventRecord) -> EventRecord:
    return replace(record, payload=orjson.loads(orjson.dumps(record.payload)))


_installed: EventBus | None = None
_default: MemoryEventBus | None = None


def set_event_bus(bus: EventBus | None) -> None:
    """Install the process's bus (the Postgres one in a fleet); None goes back to the default."""
    global _installed
    if bus is not None and not isinstance(bus, EventBus):
        raise InvariantError("set_event_bus needs an EventBus (publish, find, now, purge_expired)")
    _installed = bus


def event_bus() -> EventBus:
    """The installed bus, else this process's memory bus (created on first use)."""
    global _default
    if _installed is not None:
        return _installed
    if _default is None:
        _default = MemoryEventBus()
    return _default


def reset_event_bus() -> None:
    """Test seam beside ``reset_job_driver()``: forget the installed bus and every event the
    default one held, so an answer one test published cannot resume the next test's wait."""
    global _installed, _default
    _installed = None
    _default = None


class _Acting(Enum):
    TENANT = "the acting tenant"


ACTING_TENANT = _Acting.TENANT
"""``publish_event``'s default tenant: the acting one (``current_tenant()``)."""


async def publish_event(
    name: str,
    payload: JSONValue,
    *,
    ttl_ms: int | None = None,
    tenant: str | _Acting | None = ACTING_TENANT,
) -> EventRecord:
    """Publish on the process's bus; a ``step.wait_for_event`` on ``name`` may match it when
    the event reaches its job's tenant. ``tenant`` defaults to the acting tenant (inside a job
    body, the job's; outside any, None: every tenant's waiters); the edges pass the token's."""
    publisher = current_tenant() if isinstance(tenant, _Acting) else tenant
    return await event_bus().publish(name, payload, ttl_ms=ttl_ms, tenant=publisher)


@dataclass(frozen=True, slots=True)
class EventsPurgeTarget:
    """The bus as a ``purge()`` target: ``purge_expired`` deletes what expired on the BUS clock.

    ``now_ms`` (the sweep's one reading) is accepted for the target shape and not used: an
    event's expiry was stamped by the bus clock, so only that clock may decide it has passed.
    """

    bus: EventBus
    name: str = EVENTS_PURGE_TARGET

    async def purge_expired(self, now_ms: int | None = None) -> int:
        return await self.bus.purge_expired()

    async def count_expired(self, now_ms: int | None = None) -> int | None:
        """What a purge would remove now, when the bus can count it (None when it cannot)."""
        count = getattr(self.bus, "count_expired", None)
        return None if count is None else int(await count())


def events_purge_target(bus: EventBus) -> EventsPurgeTarget:
    """``targets: lambda: [events_purge_target(event_bus())]`` in a ``purge()`` declaration."""
    return EventsPurgeTarget(bus=bus)
