"""Endpoints, subscriptions, events and the delivery ledger in Postgres (``0010_webhooks.sql``).

``PgWebhookStore`` is what the operator commands and the built-in family read and write; its
``ledger`` (``ujobs.webhooks.ledger_pg``) is the ``WebhookLedger`` the family records into. Secrets
and the values of an endpoint's own headers are sealed by a ``SecretBox`` before they reach a
row and opened only to deliver (``ujobs.webhooks.endpoint_headers``); a row whose header values are
still in clear (written before migration 0019) is sealed by ``seal_clear_headers`` (the
deliverer's start) and by ``reseal``. Every statement is a named file under
``sql/queries/webhooks_*.sql``.
"""

from __future__ import annotations

import base64
import logging
import secrets as random_secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.read_batch import ReadBatcher
from ujobs.drivers.postgres.sql import query
from ujobs.ids import new_id
from ujobs.webhooks.endpoint_headers import check_headers, header_names, open_headers, seal_headers
from ujobs.webhooks.errors import (
    WebhookEndpointInvalidError,
    WebhookEndpointUnknownError,
    WebhookEventInvalidError,
)
from ujobs.webhooks.family import Endpoint, Event, check_rate
from ujobs.webhooks.ledger import DeliveryAttempt
from ujobs.webhooks.ledger_pg import PgWebhookLedger
from ujobs.webhooks.pace_pg import PgPace
from ujobs.webhooks.payload import Payload, check_payload
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.signature import SCHEMES, Scheme, generate_secret, hmac_key
from ujobs.webhooks.ssrf import GuardPolicy, check_url

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

log = logging.getLogger("ujobs.webhooks")

ROTATION_GRACE_MS = 24 * 3_600_000
MAX_TOPICS = 100
MAX_OPENED_ENDPOINTS = 1024
_ENDPOINT_COLUMNS = (
    "id",
    "url",
    "scheme",
    "secret_sealed",
    "previous_secret_sealed",
    "headers",
    "headers_sealed",
    "disabled",
    "rate_per_s",
    "payload",
)


@dataclass(frozen=True, slots=True)
class EndpointInfo:
    """An endpoint as an operator lists it: never its secret, nor its headers' values."""

    id: str
    tenant_id: str | None
    url: str
    scheme: str
    payload: str
    """``envelope`` (the Standard Webhooks body naming the topic) or ``raw``."""
    description: str
    headers: tuple[str, ...]
    """The names of the endpoint's own headers (a value may be a credential)."""
    topics: list[str]
    rate_per_s: float | None
    disabled_at_ms: int | None
    disabled_reason: str | None
    consecutive_failures: int
    rotating: bool
    created_at_ms: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "tenant": self.tenant_id,
            "url": self.url,
            "scheme": self.scheme,
            "payload": self.payload,
            "description": self.description,
            "headers": list(self.headers),
            "topics": self.topics,
            "ratePerS": self.rate_per_s,
            "disabledAtMs": self.disabled_at_ms,
            "disabledReason": self.disabled_reason,
            "consecutiveFailures": self.consecutive_failures,
            "rotating": self.rotating,
            "createdAtMs": self.created_at_ms,
        }


@dataclass(frozen=True, slots=True)
class Loaded:
    """One attempt's reads: the endpoint (secrets opened) and its tenant, the event (None when
    unknown) and its tenant."""

    endpoint: Endpoint
    tenant_id: str | None
    event: Event | None
    event_tenant_id: str | None


@dataclass(frozen=True, slots=True)
class Created:
    """A new endpoint and its secret: the one answer that shows the secret."""

    id: str
    secret: str


def _check_topic(topic: str) -> str:
    if not isinstance(topic, str) or not topic or ":" in topic or len(topic) > 200:
        raise WebhookEventInvalidError(
            f"a topic is a non-empty name of at most 200 characters without ':', got {topic!r}",
            meta={"field": "topic"},
        )
    return topic


def _payload_for(scheme: Scheme, payload: str | None) -> Payload:
    if payload is None:
        return "envelope" if scheme == "standard" else "raw"
    chosen = check_payload(payload)
    if scheme == "ultimate" and chosen != "raw":
        raise WebhookEndpointInvalidError(
            "the ultimate scheme names the topic in x-ultimate-webhook-topic and sends the body "
            'as published: its payload is "raw"',
            meta={"field": "payload"},
        )
    return chosen


def _check_secret(scheme: str, secret: str) -> str:
    if scheme == "standard":
        hmac_key(secret)  # a whsec_ secret whose key decodes
    elif not secret:
        raise WebhookEndpointInvalidError("a secret must not be empty")
    return secret


class PgWebhookStore:
    def __init__(
        self,
        pool: Pool,
        box: SecretBox,
        *,
        clock: Clock = SYSTEM_CLOCK,
        policy: GuardPolicy | None = None,
        batch_delivered_ms: int | None = None,
    ) -> None:
        self._pool = pool
        self._box = box
        self._clock = clock
        self._policy = policy if policy is not None else GuardPolicy()
        self.ledger = PgWebhookLedger(pool, clock, batch_delivered_ms=batch_delivered_ms)
        self.pace = PgPace(pool, clock)
        self._loads: ReadBatcher[tuple[str, str], Loaded] = ReadBatcher(self._load_many)
        self._opened: dict[tuple[Any, ...], Endpoint] = {}

    # -- endpoints -------------------------------------------------------------------------
    async def add_endpoint(
        self,
        url: str,
        *,
        tenant: str | None = None,
        topics: Sequence[str] = ("*",),
        scheme: str = "standard",
        secret: str | None = None,
        headers: Mapping[str, str] | None = None,
        description: str = "",
        endpoint_id: str | None = None,
        rate_per_s: float | None = None,
        payload: str | None = None,
    ) -> Created:
        """Register an endpoint subscribed to ``topics``; answers its id and secret (made here
        unless given). The URL is checked now (scheme, credentials, a refused IP literal) and
        its address again at every connect.

        ``payload`` is what its deliveries carry: ``envelope`` (the default on the standard
        scheme: the Standard Webhooks ``{"type", "timestamp", "data"}``, so the partner reads
        the topic) or ``raw`` (the published bytes). The spec's ``ultimate`` scheme names the
        topic in its own header and sends the body as published: ``raw`` only."""
        check_url(url, self._policy)
        if scheme not in SCHEMES:
            raise WebhookEndpointInvalidError(
                f"scheme must be one of {', '.join(SCHEMES)}, got {scheme!r}",
                meta={"field": "scheme"},
            )
        if not topics or len(topics) > MAX_TOPICS:
            raise WebhookEndpointInvalidError(
                f"an endpoint subscribes to 1 to {MAX_TOPICS} topics ('*' for every topic)"
            )
        chosen: Scheme = "ultimate" if scheme == "ultimate" else "standard"
        body_kind = _payload_for(chosen, payload)
        clean_topics = [_check_topic(t) for t in topics]
        plain = _check_secret(chosen, secret if secret is not None else generate_secret())
        own = check_headers(headers or {})
        ident = endpoint_id or f"ep_{new_id()}"
        check_rate(ident, rate_per_s)
        async with self._pool.acquire() as conn, conn.transaction():
            inserted = await conn.fetchval(
                query("webhooks_endpoint_insert"),
                ident,
                tenant,
                url,
                chosen,
                self._box.seal(plain, aad=ident),
                header_names(own),
                description,
                self._clock.now_ms(),
                rate_per_s,
                seal_headers(self._box, ident, own),
                body_kind,
            )
            if inserted is None:
                raise WebhookEndpointInvalidError(
                    f"an endpoint {ident!r} already exists", meta={"endpoint_id": ident}
                )
            await conn.execute(query("webhooks_subscribe"), ident, clean_topics)
        return Created(id=ident, secret=plain)

    async def endpoint(self, endpoint_id: str) -> tuple[Endpoint, str | None] | None:
        """The endpoint as the deliverer signs with it (secrets opened, newest first) and its
        tenant; None when unknown."""
        row = await self._pool.fetchrow(
            query("webhooks_endpoint_get"), endpoint_id, self._clock.now_ms()
        )
        if row is None:
            return None
        return self._endpoint_of(row), row["tenant_id"]

    async def load(self, endpoint_id: str, event_id: str) -> Loaded | None:
        """The endpoint and the event of one delivery attempt, read after the call (never
        answered from an earlier read); the attempts that ask while a read is in flight share
        the next statement."""
        return await self._loads.read((endpoint_id, event_id))

    async def _load_many(self, pairs: Sequence[tuple[str, str]]) -> dict[tuple[str, str], Loaded]:
        rows = await self._pool.fetch(
            query("webhooks_delivery_load"),
            [endpoint for endpoint, _ in pairs],
            [event for _, event in pairs],
            self._clock.now_ms(),
        )
        found: dict[tuple[str, str], Loaded] = {}
        for row in rows:
            event = (
                None
                if row["event_id"] is None
                else Event(
                    id=row["event_id"],
                    topic=row["event_topic"],
                    body=bytes(row["event_body"]),
                    published_at_ms=row["event_created_at_ms"],
                )
            )
            found[(row["asked_endpoint_id"], row["asked_event_id"])] = Loaded(
                endpoint=self._opened_endpoint(row),
                tenant_id=row["tenant_id"],
                event=event,
                event_tenant_id=row["event_tenant_id"],
            )
        return found

    def _opened_endpoint(self, row: Any) -> Endpoint:
        """``_endpoint_of(row)``, remembered by the row's own values: the same row read again
        costs no decryption, and a rotation, a disable or any edit is a different row, so the
        answer is always the row just read."""
        key = tuple(row[c] for c in _ENDPOINT_COLUMNS)
        endpoint = self._opened.get(key)
        if endpoint is None:
            if len(self._opened) >= MAX_OPENED_ENDPOINTS:
                self._opened.clear()
            endpoint = self._opened[key] = self._endpoint_of(row)
        return endpoint

    def _endpoint_of(self, row: Any) -> Endpoint:
        sealed = [row["secret_sealed"]]
        if row["previous_secret_sealed"] is not None:
            sealed.append(row["previous_secret_sealed"])
        return Endpoint(
            id=row["id"],
            url=row["url"],
            secrets=tuple(self._box.open(s, aad=row["id"]) for s in sealed),
            scheme=row["scheme"],
            headers=open_headers(self._box, row["id"], row["headers"], row["headers_sealed"]),
            disabled=row["disabled"],
            rate_per_s=row["rate_per_s"],
            payload=check_payload(row["payload"]),
        )

    async def endpoints(self, tenant: str | None = None) -> list[EndpointInfo]:
        rows = await self._pool.fetch(query("webhooks_endpoint_list"), tenant, self._clock.now_ms())
        return [
            EndpointInfo(
                id=r["id"],
                tenant_id=r["tenant_id"],
                url=r["url"],
                scheme=r["scheme"],
                payload=r["payload"],
                description=r["description"],
                headers=tuple(r["header_names"]),
                topics=list(r["topics"]),
                rate_per_s=r["rate_per_s"],
                disabled_at_ms=r["disabled_at_ms"],
                disabled_reason=r["disabled_reason"],
                consecutive_failures=r["consecutive_failures"],
                rotating=bool(r["rotating"]),
                created_at_ms=r["created_at_ms"],
            )
            for r in rows
        ]

    async def _one(self, statement: str, endpoint_id: str, *args: Any) -> None:
        found = await self._pool.fetchval(statement, endpoint_id, *args)
        if found is None:
            raise WebhookEndpointUnknownError(
                f"no endpoint {endpoint_id!r}", meta={"endpoint_id": endpoint_id}
            )

    async def disable(self, endpoint_id: str, reason: str = "operator") -> None:
        await self._one(
            query("webhooks_endpoint_disable"), endpoint_id, reason, self._clock.now_ms()
        )

    async def enable(self, endpoint_id: str) -> None:
        await self._one(query("webhooks_endpoint_enable"), endpoint_id, self._clock.now_ms())

    async def subscribe(self, endpoint_id: str, topics: Sequence[str]) -> None:
        clean = [_check_topic(t) for t in topics]
        if await self.endpoint(endpoint_id) is None:
            raise WebhookEndpointUnknownError(
                f"no endpoint {endpoint_id!r}", meta={"endpoint_id": endpoint_id}
            )
        await self._pool.execute(query("webhooks_subscribe"), endpoint_id, clean)

    async def unsubscribe(self, endpoint_id: str, topics: Sequence[str]) -> list[str]:
        """Answers the topics that were subscribed and no longer are."""
        rows = await self._pool.fetch(query("webhooks_unsubscribe"), endpoint_id, list(topics))
        return sorted(r["topic"] for r in rows)

    async def rotate_secret(
        self, endpoint_id: str, *, secret: str | None = None, grace_ms: int = ROTATION_GRACE_MS
    ) -> str:
        """A new secret signs from now; the old one signs beside it for ``grace_ms``."""
        found = await self.endpoint(endpoint_id)
        if found is None:
            raise WebhookEndpointUnknownError(
                f"no endpoint {endpoint_id!r}", meta={"endpoint_id": endpoint_id}
            )
        endpoint, _ = found
        plain = _check_secret(endpoint.scheme, secret if secret is not None else generate_secret())
        now = self._clock.now_ms()
        await self._one(
            query("webhooks_endpoint_rotate"),
            endpoint_id,
            self._box.seal(plain, aad=endpoint_id),
            now + grace_ms,
            now,
        )
        return plain

    async def reseal(self) -> int:
        """Seal every secret and every endpoint's header values again under the box's current
        key (header values still in clear are sealed); answers how many rows moved."""
        moved: set[str] = set()
        for row in await self._pool.fetch(query("webhooks_endpoint_sealed")):
            ident = row["id"]
            if await self._seal_row_headers(row, clear_only=False):
                moved.add(ident)
            current, previous = row["secret_sealed"], row["previous_secret_sealed"]
            if self._box.key_of(current) == self._box.current and (
                previous is None or self._box.key_of(previous) == self._box.current
            ):
                continue
            fresh = self._box.seal(self._box.open(current, aad=ident), aad=ident)
            fresh_previous = (
                None
                if previous is None
                else self._box.seal(self._box.open(previous, aad=ident), aad=ident)
            )
            done = await self._pool.fetchval(
                query("webhooks_endpoint_reseal"), ident, current, fresh, fresh_previous
            )
            if done is not None:
                moved.add(ident)
        return len(moved)

    async def seal_clear_headers(self) -> int:
        """Seal the header values still in clear (rows written before migration 0019) under
        the box's current key; answers how many rows it sealed. The deliverer runs it at
        start; a row changed meanwhile is left for the next run."""
        sealed = 0
        for row in await self._pool.fetch(query("webhooks_endpoint_headers_clear")):
            sealed += await self._seal_row_headers(row, clear_only=True)
        return sealed

    async def _seal_row_headers(self, row: Any, *, clear_only: bool) -> bool:
        ident, stored, sealed = row["id"], row["headers"], row["headers_sealed"]
        if sealed is None and stored == "{}":
            return False
        if sealed is not None and (clear_only or self._box.key_of(sealed) == self._box.current):
            return False
        values = open_headers(self._box, ident, stored, sealed)
        done = await self._pool.fetchval(
            query("webhooks_endpoint_seal_headers"),
            ident,
            stored,
            sealed,
            header_names(values),
            seal_headers(self._box, ident, values),
        )
        return done is not None

    # -- events ----------------------------------------------------------------------------
    async def store_event(
        self, topic: str, body: bytes | str, *, tenant: str | None, event_id: str | None = None
    ) -> tuple[str, list[tuple[str, str | None]]]:
        """Store an event and answer its id and the ``(endpoint, tenant)`` pairs it fans out to
        (the caller enqueues one delivery per pair)."""
        ident = event_id or f"evt_{new_id()}"
        if ":" in ident or not ident or any(c.isspace() for c in ident):
            raise WebhookEventInvalidError(
                f"an event id has no ':' or whitespace, got {ident!r}", meta={"field": "id"}
            )
        data = body.encode() if isinstance(body, str) else bytes(body)
        rows = await self._pool.fetch(
            query("webhooks_event_store"),
            ident,
            tenant,
            _check_topic(topic),
            data,
            self._clock.now_ms(),
        )
        return ident, [(r["id"], r["tenant_id"]) for r in rows]

    async def event(self, event_id: str) -> tuple[Event, str | None] | None:
        """The event (its exact stored bytes) and its tenant; None when unknown."""
        row = await self._pool.fetchrow(query("webhooks_event_get"), event_id)
        if row is None:
            return None
        event = Event(
            id=row["id"],
            topic=row["topic"],
            body=bytes(row["body"]),
            published_at_ms=row["created_at_ms"],
        )
        return event, row["tenant_id"]

    # -- the ledger, read ------------------------------------------------------------------
    async def deliveries(
        self, endpoint_id: str, *, failed_only: bool = False, limit: int = 50
    ) -> list[DeliveryAttempt]:
        rows = await self._pool.fetch(
            query("webhooks_deliveries_list"), endpoint_id, failed_only, limit
        )
        return [_attempt(r) for r in rows]

    async def newest_deliveries(self, endpoint_ids: Sequence[str]) -> dict[str, DeliveryAttempt]:
        """Each endpoint's newest attempt, by endpoint id, in one statement (an endpoint never
        attempted is absent): the webhooks page's column, however many endpoints it lists."""
        rows = await self._pool.fetch(query("webhooks_deliveries_newest"), list(endpoint_ids))
        return {r["endpoint_id"]: _attempt(r) for r in rows}

    async def failed_events(self, endpoint_id: str, since_ms: int) -> list[str]:
        rows = await self._pool.fetch(query("webhooks_redeliver_candidates"), endpoint_id, since_ms)
        return [r["event_id"] for r in rows]


def _attempt(r: Any) -> DeliveryAttempt:
    return DeliveryAttempt(
        endpoint_id=r["endpoint_id"],
        event_id=r["event_id"],
        job_id=r["job_id"],
        attempt=r["attempt"],
        outcome=r["outcome"],
        status=r["status"],
        code=r["code"],
        latency_ms=r["latency_ms"],
        response_excerpt=r["response_excerpt"],
        at_ms=r["at_ms"],
    )


def new_secret_key() -> str:
    """A fresh ``UJOBS_SECRET_KEY`` value (32 random bytes, base64)."""
    return base64.b64encode(random_secrets.token_bytes(32)).decode()
