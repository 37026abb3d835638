"""Who is calling and what they may do: one implementation for every edge (HTTP, NATS).

Nothing here knows aiohttp. An edge hands ``authenticate`` the ``Authorization`` value it
received and a ``TokenLookup`` (``ujobs.services.api.tokens.TokenStore``); it gets a ``Principal`` back,
or ``X_UNAUTHORIZED`` (no, unknown, revoked or expired token). The principal then answers the
rules:

| Rule | Refusal |
|---|---|
| a scope the call needs (``require``); ``admin`` grants every scope, ``enqueue:*`` every job | ``X_FORBIDDEN`` (403) |
| a tenant token enqueues only work whose ``tenant(input)`` is its own tenant (``check_enqueue_tenant``) | ``X_TENANCY_ACTOR_MISMATCH`` (403) |
| a tenant token sees only its own tenant's jobs (``sees``): another tenant's job is "not found" | the edge's not-found (404), never 403 |
| a call over every tenant (queues, tasks) needs an operator token (``require_operator``) | ``X_FORBIDDEN`` (403) |

The enqueue's actor is the token (``actor()``): ``enqueued_by`` names the token's id.

``authenticate`` reads the token on every call. ``authenticate_known`` is the single enqueue's
reading: a token's fixed facts from ``ujobs.services.api.token_facts`` (expiry checked here), its
revocation left to the enqueue's own statement (``ujobs.services.api.token_guard``).
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from ujobs.context import Actor
from ujobs.errors import DriverUnavailableError, TenancyActorMismatchError, UltimateError
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.api.tokens import TokenRecord

MAX_SECRET_LENGTH = 256
"""The longest bearer secret read (a token is 49 characters): a longer one is no token."""


class UnauthorizedError(UltimateError):
    """No credentials, or a token that is unknown, revoked or expired (401)."""

    code = "X_UNAUTHORIZED"


class ForbiddenError(UltimateError):
    """A valid token without the scope (or the operator standing) the call needs (403)."""

    code = "X_FORBIDDEN"


class TokenLookup(Protocol):
    async def find(self, secret: str) -> TokenRecord | None: ...


class _NoTokens:
    """The lookup of a deployment with no Postgres (the Redis driver alone): tokens live in
    Postgres, so every authenticated call is ``X_DRIVER_UNAVAILABLE`` naming DATABASE_URL."""

    async def find(self, secret: str) -> TokenRecord | None:
        raise DriverUnavailableError(
            "the api's tokens live in Postgres; set DATABASE_URL (and run `ujobs db migrate`)",
            meta={"variable": "DATABASE_URL"},
        )


NO_TOKENS: TokenLookup = _NoTokens()


@dataclass(frozen=True, slots=True)
class Principal:
    """An authenticated token: its id, its tenant (None: operator) and its scopes."""

    token_id: str
    tenant_id: str | None
    scopes: frozenset[str] = field(default_factory=frozenset)

    @property
    def operator(self) -> bool:
        return self.tenant_id is None

    def allows(self, scope: str) -> bool:
        if "admin" in self.scopes or scope in self.scopes:
            return True
        return scope.startswith("enqueue:") and "enqueue:*" in self.scopes

    def require(self, scope: str) -> None:
        if not self.allows(scope):
            raise ForbiddenError(
                f"this token lacks the scope {scope!r}; create one that has it with "
                f"`ujobs tokens create --scopes {scope}`",
                meta={"scope": scope, "token": self.token_id},
            )

    def require_operator(self, what: str) -> None:
        if not self.operator:
            raise ForbiddenError(
                f"{what} spans every tenant; it needs an operator token "
                "(`ujobs tokens create --operator`)",
                meta={"token": self.token_id},
            )

    def check_enqueue_tenant(self, job: str, tenant_id: str | None) -> None:
        """A tenant token queues only its own tenant's work (a ``tenant='none'`` job too is
        another tenant's: it belongs to none)."""
        if self.tenant_id is not None and tenant_id != self.tenant_id:
            raise TenancyActorMismatchError(
                f"job {job!r}: the input names tenant {tenant_id!r} but this token acts for "
                f"{self.tenant_id!r}; a tenant token can only queue its own tenant's work",
                meta={"job": job, "tenant": tenant_id, "actor_org": self.tenant_id},
            )

    def sees(self, tenant_id: str | None) -> bool:
        """Whether a job of ``tenant_id`` exists for this token (an operator sees every one)."""
        return self.tenant_id is None or tenant_id == self.tenant_id

    def actor(self) -> Actor:
        return Actor(id=self.token_id, org_id=self.tenant_id, kind="token", scopes=self.scopes)


def bearer_secret(authorization: str | None) -> str:
    """The secret of ``Authorization: Bearer <token>``; anything else is ``X_UNAUTHORIZED``."""
    if not authorization:
        raise UnauthorizedError(
            "no credentials: send Authorization: Bearer <token> (`ujobs tokens create`)"
        )
    scheme, _, secret = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not secret.strip():
        raise UnauthorizedError("the Authorization header must be `Bearer <token>`")
    secret = secret.strip()
    # Bytes that are not UTF-8 reach here as surrogates (aiohttp) or U+FFFD (nats-py), and a
    # cookie can carry anything: a token is printable ASCII (``ujobs_`` and base64url), so
    # anything else is no token, refused before it is hashed or looked up.
    if len(secret) > MAX_SECRET_LENGTH or not (secret.isascii() and secret.isprintable()):
        raise UnauthorizedError("unknown token; `ujobs tokens list` shows the live ones")
    return secret


async def authenticate(lookup: TokenLookup, authorization: str | None, now_ms: int) -> Principal:
    """The principal behind ``authorization`` at ``now_ms``: read from the store on every
    call, so a revoke or an expiry holds from the next request on."""
    secret = bearer_secret(authorization)
    return _principal(await lookup.find(secret), now_ms)


async def authenticate_known(
    known: KnownTokens, lookup: TokenLookup, authorization: str | None, now_ms: int
) -> tuple[Principal, bool]:
    """``authenticate`` for a call whose own statement checks revocation (the single enqueue,
    ``enqueue_insert_live.sql``): a token this process already found live answers from its
    fixed facts (``KnownTokens``; expiry checked here), else it is read from the store and
    remembered. The flag says whether the store was read now; False leaves the token's
    liveness to the caller's statement (``revoked`` is its refusal)."""
    secret = bearer_secret(authorization)
    record = known.get(secret)
    if record is not None:
        try:
            return _principal(record, now_ms), False
        except UnauthorizedError:
            known.forget(secret)  # expired: its next call reads the table and says so
            raise
    record = await lookup.find(secret)
    principal = _principal(record, now_ms)
    if record is not None:
        known.remember(secret, record)
    return principal, True


def revoked(token_id: str) -> UnauthorizedError:
    """A token whose liveness a statement checked and found dead (its expiry was checked
    before the statement, so it was revoked)."""
    return UnauthorizedError(
        f"token {token_id} was revoked; create another", meta={"token": token_id}
    )


def _principal(record: TokenRecord | None, now_ms: int) -> Principal:
    if record is None:
        raise UnauthorizedError("unknown token; `ujobs tokens list` shows the live ones")
    if record.revoked_at_ms is not None:
        raise revoked(record.id)
    if record.expires_at_ms is not None and now_ms >= record.expires_at_ms:
        raise UnauthorizedError(
            f"token {record.id} expired; create another", meta={"token": record.id}
        )
    return Principal(
        token_id=record.id, tenant_id=record.tenant_id, scopes=frozenset(record.scopes)
    )


__all__ = [
    "NO_TOKENS",
    "ForbiddenError",
    "Principal",
    "TokenLookup",
    "UnauthorizedError",
    "authenticate",
    "authenticate_known",
    "bearer_secret",
    "revoked",
]
