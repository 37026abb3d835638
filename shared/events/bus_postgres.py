"""The stored event bus over ``x_job_events`` (``step.wait_for_event`` listens on it).

One clock: ``published_at``, the expiry and ``now()`` all come from the DATABASE (to the
millisecond), never from the process, so a worker whose clock runs ahead of the database still
matches an event published after it asked. A dict ``match`` is prefiltered in SQL with jsonb
containment and then checked exactly by ``ujobs.events.bus.matches`` (containment is looser on
arrays); a callable match pages through the name's live events in order. The tenant rule
(``ujobs.events.bus.reaches``) is the statement's: only events that reach the waiter's
tenant are read at all.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import asyncpg

from ujobs.drivers.postgres.rows import dumps, loads
from ujobs.drivers.postgres.sql import query
from ujobs.errors import InvariantError
from ujobs.events.bus import (
    DEFAULT_EVENT_TTL_MS,
    EventRecord,
    JSONValue,
    Match,
    json_payload,
    matches,
    validate_event_name,
)
from ujobs.ids import new_id

if TYPE_CHECKING:
    Pool = asyncpg.Pool[Any]

FIND_PAGE = 200
PURGE_BATCH_SIZE = 1_000
PURGE_MAX_BATCHES = 50

_PUBLISH = query("event_publish")
_FIND = query("event_find")
_NOW = query("event_now")
_PURGE = query("events_purge")
_COUNT = query("events_purge_count")


class PostgresEventBus:
    """``EventBus`` stored in Postgres."""

    def __init__(self, pool: Pool, *, ttl_ms: int = DEFAULT_EVENT_TTL_MS) -> None:
        _check_ttl(ttl_ms)
        self._pool = pool
        self.ttl_ms = ttl_ms

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
        _check_ttl(ttl)
        event_id = new_id()
        row = await self._pool.fetchrow(_PUBLISH, event_id, name, dumps(stored), ttl, tenant)
        assert row is not None
        return EventRecord(
            id=event_id,
            name=name,
            payload=stored,
            published_at_ms=row["published_at_ms"],
            expires_at_ms=row["expires_at_ms"],
            tenant=tenant,
        )

    async def find(
        self,
        name: str,
        *,
        since_ms: int,
        match: Match | None = None,
        tenant: str | None = None,
    ) -> EventRecord | None:
        contains = None if match is None or callable(match) else dumps(dict(match))
        cursor: tuple[int | None, str | None] = (None, None)
        while True:
            rows = await self._pool.fetch(
                _FIND, name, since_ms, contains, cursor[0], cursor[1], FIND_PAGE, tenant
            )
            for r in rows:
                payload = loads(r["payload"])
                if matches(match, payload):
                    return EventRecord(
                        id=r["id"],
                        name=r["name"],
                        payload=payload,
                        published_at_ms=r["published_at_ms"],
                        expires_at_ms=r["expires_at_ms"],
                        tenant=r["tenant_id"],
                    )
            if len(rows) < FIND_PAGE:
                return None
            cursor = (rows[-1]["published_at_ms"], rows[-1]["id"])

    async def now(self) -> int:
        return int(await self._pool.fetchval(_NOW))

    async def purge_expired(self) -> int:
        """At most ``PURGE_MAX_BATCHES`` deletes of ``PURGE_BATCH_SIZE`` rows, skip locked, so
        a sweep never holds a long lock; the next pass takes what is left."""
        removed = 0
        for _ in range(PURGE_MAX_BATCHES):
            deleted = int(await self._pool.fetchval(_PURGE, PURGE_BATCH_SIZE))
            removed += deleted
            if deleted < PURGE_BATCH_SIZE:
                break
        return removed

    async def count_expired(self) -> int:
        """The expired events a purge would remove now (``ujobs db purge --dry-run``)."""
        return int(await self._pool.fetchval(_COUNT))


def _check_ttl(ttl_ms: object) -> None:
    if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or ttl_ms < 1:
        raise InvariantError(
            "an event's ttl_ms must be a whole number of at least 1", meta={"ttl_ms": ttl_ms}
        )


def postgres_event_bus(pool: Pool, *, ttl_ms: int = DEFAULT_EVENT_TTL_MS) -> PostgresEventBus:
    """The stored bus over ``pool`` (``x_job_events``; run ``ujobs db migrate`` first)."""
    return PostgresEventBus(pool, ttl_ms=ttl_ms)
