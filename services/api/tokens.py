"""The api's bearer tokens: minted once, stored as a hash, looked up on every request.

A token is ``ujobs_`` and 32 random bytes (base64url). Only its SHA-256 is stored
(``x_api_tokens``, migration 0009): the secret is printed once by ``ujobs tokens create`` and
never again. A token belongs to one tenant, or to none (an operator token), and carries scopes
(``parse_scopes``). A revoke or an expiry is read by the next request, in every api process,
with no restart: the lookup caches nothing, and the single enqueue, which keeps a token's fixed
facts (``ujobs.services.api.token_facts``), checks revocation in its own insert statement.

``TokenStore`` is the Postgres store; ``ujobs.services.api.auth`` turns what it finds into a
``Principal`` for both edges (HTTP now, NATS later) and holds the rules of who may do what.
"""

from __future__ import annotations

import asyncio
import hashlib
import secrets
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.pooled import pooled
from ujobs.drivers.postgres.sql import query
from ujobs.errors import ConfigInvalidError, UltimateError
from ujobs.jobs.declaration_rules import NAME_PATTERN
from ujobs.limits import MAX_TENANT_BYTES, text_problem

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

TOKEN_PREFIX = "ujobs_"
TOKEN_BYTES = 32
MAX_TENANT_LENGTH = MAX_TENANT_BYTES
FIXED_SCOPES = ("events:publish", "read", "operate", "admin")
"""Scopes besides ``enqueue:<job>`` / ``enqueue:*``. ``admin`` grants every scope."""

_CREATE = query("tokens_create")
_FIND = query("tokens_find")
_FIND_MANY = query("tokens_find_many")
_LIST = query("tokens_list")
_REVOKE = query("tokens_revoke")


class TokenNotFoundError(UltimateError):
    code = "X_TOKEN_NOT_FOUND"


def parse_scopes(raw: str | Iterable[str], *, flag: str = "--scopes") -> tuple[str, ...]:
    """``enqueue:*,events:publish`` (or a list) as sorted, distinct scopes; an unknown one is
    ``X_CONFIG_INVALID`` naming it."""
    items = raw.split(",") if isinstance(raw, str) else list(raw)
    scopes: set[str] = set()
    for item in items:
        scope = item.strip()
        if not scope:
            continue
        if scope in FIXED_SCOPES or scope == "enqueue:*":
            scopes.add(scope)
            continue
        kind, _, job = scope.partition(":")
        if kind == "enqueue" and NAME_PATTERN.match(job):
            scopes.add(scope)
            continue
        raise ConfigInvalidError(
            f"{flag}: {scope!r} is not a scope; use enqueue:<job>, enqueue:*, "
            + ", ".join(FIXED_SCOPES),
            meta={"variable": flag, "scope": scope},
        )
    if not scopes:
        raise ConfigInvalidError(
            f"{flag}: a token needs at least one scope (enqueue:<job>, enqueue:*, "
            + ", ".join(FIXED_SCOPES)
            + ")",
            meta={"variable": flag},
        )
    return tuple(sorted(scopes))


def check_tenant(tenant: str, *, flag: str = "--tenant") -> str:
    if text_problem(tenant, MAX_TENANT_LENGTH) is not None or tenant != tenant.strip():
        raise ConfigInvalidError(
            f"{flag}: a tenant is 1-{MAX_TENANT_LENGTH} bytes of UTF-8 with no surrounding spaces",
            meta={"variable": flag},
        )
    return tenant


def hash_token(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


@dataclass(frozen=True, slots=True)
class TokenRecord:
    """A stored token, as ``list`` shows it and ``auth`` reads it (never its secret)."""

    id: str
    name: str | None
    tenant_id: str | None
    scopes: tuple[str, ...]
    created_at_ms: int
    expires_at_ms: int | None = None
    revoked_at_ms: int | None = None

    @property
    def operator(self) -> bool:
        return self.tenant_id is None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "tenant": self.tenant_id,
            "operator": self.operator,
            "scopes": list(self.scopes),
            "createdAtMs": self.created_at_ms,
            "expiresAtMs": self.expires_at_ms,
            "revokedAtMs": self.revoked_at_ms,
        }


@dataclass(frozen=True, slots=True)
class IssuedToken:
    """What ``create`` answers: the record and the secret, which exists nowhere else."""

    record: TokenRecord
    secret: str

    def to_json(self) -> dict[str, Any]:
        r = self.record
        return {"id": r.id, "token": self.secret, "tenant": r.tenant_id, "scopes": list(r.scopes)}


def _record(row: Any) -> TokenRecord:
    return TokenRecord(
        id=row["id"],
        name=row["name"],
        tenant_id=row["tenant_id"],
        scopes=tuple(row["scopes"]),
        created_at_ms=row["created_at_ms"],
        expires_at_ms=row["expires_at_ms"],
        revoked_at_ms=row["revoked_at_ms"],
    )


class TokenStore:
    """Tokens in Postgres; ``clock`` stamps creation, expiry and revocation. Postgres being
    away (refusing, restarting, a session it ended) is ``X_DRIVER_UNREACHABLE``
    (``ujobs.drivers.postgres.pooled``), which the api answers 503."""

    def __init__(self, pool: Pool, *, clock: Clock = SYSTEM_CLOCK) -> None:
        self._pool = pool
        self.clock = clock

    @property
    def pool(self) -> Pool:
        """The pool the tokens are read through (the api asks whether its jobs share it)."""
        return self._pool

    async def create(
        self,
        *,
        tenant: str | None,
        scopes: Iterable[str],
        name: str | None = None,
        expires_in_ms: int | None = None,
    ) -> IssuedToken:
        """Mint a token for ``tenant`` (None: an operator token)."""
        chosen = parse_scopes(scopes)
        if tenant is not None:
            check_tenant(tenant)
        now = self.clock.now_ms()
        expires = None if expires_in_ms is None else now + expires_in_ms
        token_id = "tok_" + secrets.token_hex(8)
        secret = TOKEN_PREFIX + secrets.token_urlsafe(TOKEN_BYTES)
        async with pooled(self._pool) as conn:
            await conn.execute(
                _CREATE, token_id, name, tenant, list(chosen), hash_token(secret), now, expires
            )
        record = TokenRecord(
            id=token_id,
            name=name,
            tenant_id=tenant,
            scopes=chosen,
            created_at_ms=now,
            expires_at_ms=expires,
        )
        return IssuedToken(record=record, secret=secret)

    async def find(self, secret: str) -> TokenRecord | None:
        """The token ``secret`` is, revoked and expired ones included; None: no such token."""
        async with pooled(self._pool) as conn:
            row = await conn.fetchrow(_FIND, hash_token(secret))
        return None if row is None else _record(row)

    async def find_many(self, secrets: Iterable[str]) -> dict[str, TokenRecord]:
        """``find`` for several secrets in one statement: secret -> record (absent: unknown)."""
        by_hash = {hash_token(secret): secret for secret in secrets}
        async with pooled(self._pool) as conn:
            rows = await conn.fetch(_FIND_MANY, list(by_hash))
        return {by_hash[bytes(row["hash"])]: _record(row) for row in rows}

    async def list(self) -> list[TokenRecord]:
        async with pooled(self._pool) as conn:
            return [_record(r) for r in await conn.fetch(_LIST)]

    async def revoke(self, token_id: str) -> None:
        """Revoke ``token_id``; the next request that shows it is 401. Unknown id:
        ``X_TOKEN_NOT_FOUND``."""
        async with pooled(self._pool) as conn:
            revoked = await conn.fetchval(_REVOKE, token_id, self.clock.now_ms())
        if revoked is None:
            raise TokenNotFoundError(
                f"no token has the id {token_id!r}; `ujobs tokens list` shows them",
                meta={"id": token_id},
            )


class BatchedLookup:
    """``find`` with concurrent lookups sharing one statement (natural batching: a lookup
    finding no statement in flight goes at once; those arriving meanwhile go together next).
    Nothing is cached: every request still reads the row, so a revoke holds from the next
    request on."""

    def __init__(self, store: TokenStore) -> None:
        self.store = store
        self._waiting: dict[str, list[asyncio.Future[TokenRecord | None]]] = {}
        self._busy = False
        self._task: asyncio.Task[None] | None = None  # held: the loop keeps only a weak one

    async def find(self, secret: str) -> TokenRecord | None:
        if not self._busy:
            # Nothing in flight: look it up from this task; who arrives meanwhile waits.
            self._busy = True
            try:
                found = await self.store.find_many([secret])
            finally:
                self._next()
            return found.get(secret)
        future: asyncio.Future[TokenRecord | None] = asyncio.get_running_loop().create_future()
        self._waiting.setdefault(secret, []).append(future)
        return await asyncio.shield(future)

    def _next(self) -> None:
        if self._waiting:
            self._task = asyncio.get_running_loop().create_task(self._run())
        else:
            self._busy = False

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch, self._waiting = self._waiting, {}
                try:
                    found = await self.store.find_many(batch)
                except Exception as exc:
                    for futures in batch.values():
                        for future in futures:
                            if not future.done():
                                future.set_exception(exc)
                                future.exception()
                    continue
                for secret, futures in batch.items():
                    for future in futures:
                        if not future.done():
                            future.set_result(found.get(secret))
        finally:
            self._busy = False


__all__ = [
    "FIXED_SCOPES",
    "BatchedLookup",
    "IssuedToken",
    "TokenNotFoundError",
    "TokenRecord",
    "TokenStore",
    "hash_token",
    "parse_scopes",
]
