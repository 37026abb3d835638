"""The ambient context a piece of work runs under: actor, tenant, transaction, trace.

Held in ``contextvars`` so it follows ``await`` and ``asyncio.create_task`` and never leaks
between concurrent runs. A job body's tenant comes from its declaration (``execute_job``
installs it); an enqueue joins the transaction bound here (``bind_transaction``).
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any

from ujobs.errors import InvariantError, TenancyActorMismatchError, TenancyActorOrgRequiredError


@dataclass(frozen=True, slots=True)
class Actor:
    """Who is acting. ``org_id`` is the tenant; ``id`` is recorded as ``enqueued_by``."""

    id: str | None = None
    org_id: str | None = None
    kind: str = "user"
    scopes: frozenset[str] = field(default_factory=frozenset)


SYSTEM_ACTOR = Actor(id=None, org_id=None, kind="system")

_actor: contextvars.ContextVar[Actor | None] = contextvars.ContextVar("ujobs_actor", default=None)
_cross_tenant: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ujobs_cross_tenant", default=None
)
_transaction: contextvars.ContextVar[Any | None] = contextvars.ContextVar(
    "ujobs_transaction", default=None
)
_traceparent: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "ujobs_traceparent", default=None
)


def current_actor() -> Actor | None:
    return _actor.get()


def current_tenant() -> str | None:
    actor = _actor.get()
    return actor.org_id if actor is not None else None


@contextmanager
def acting_as(actor: Actor | None) -> Iterator[Actor | None]:
    """Run the block as ``actor`` (None: nobody)."""
    token = _actor.set(actor)
    try:
        yield actor
    finally:
        _actor.reset(token)


def require_tenant(org_id: str | None = None) -> str | None:
    """The guard a tenant-scoped read calls.

    Answers the acting org. Inside ``cross_tenant()`` it answers ``org_id`` (or None) without
    checking; otherwise a context with no org is ``X_TENANCY_ACTOR_ORG_REQUIRED`` and a row
    naming another org is ``X_TENANCY_ACTOR_MISMATCH``.
    """
    if _cross_tenant.get() is not None:
        return org_id
    acting = current_tenant()
    if acting is None:
        raise TenancyActorOrgRequiredError(
            "this read is tenant-scoped and the context carries no org; a job declared "
            "tenant='none' must wrap cross-tenant reads in cross_tenant(reason)"
        )
    if org_id is not None and org_id != acting:
        raise TenancyActorMismatchError(
            "the row belongs to another org than the acting one",
            meta={"acting": acting},
        )
    return acting


@contextmanager
def cross_tenant(reason: str) -> Iterator[None]:
    """Open a scope that spans tenants, saying why; the reason is the audit trail."""
    if not reason or not reason.strip():
        raise InvariantError("cross_tenant() needs a reason")
    token = _cross_tenant.set(reason)
    try:
        yield
    finally:
        _cross_tenant.reset(token)


def cross_tenant_reason() -> str | None:
    return _cross_tenant.get()


def current_transaction() -> Any | None:
    """The connection of the transaction the caller bound, or None outside one."""
    return _transaction.get()


@contextmanager
def bind_transaction(connection: Any) -> Iterator[Any]:
    """Make ``connection`` (an asyncpg connection inside a transaction) the ambient one.

    ``handle.enqueue()`` inside the block joins it when the outbox facade is installed::

        async with conn.transaction():
            with bind_transaction(conn):
                await create_invoice.enqueue({...})
    """
    token = _transaction.set(connection)
    try:
        yield connection
    finally:
        _transaction.reset(token)


@asynccontextmanager
async def transaction(connection: Any) -> AsyncIterator[Any]:
    """Open a transaction on ``connection`` (asyncpg) and bind it for the block: an enqueue
    inside STAGES in it (with the outbox facade installed), so the job commits or rolls back
    with the rows written beside it::

        async with pool.acquire() as conn, transaction(conn):
            await conn.execute("insert into invoices ...")
            await create_invoice.enqueue({...})
    """
    async with connection.transaction():
        with bind_transaction(connection):
            yield connection


def current_traceparent() -> str | None:
    return _traceparent.get()


@contextmanager
def traced(traceparent: str | None) -> Iterator[None]:
    """Run the block under a W3C ``traceparent``; an enqueue stamps it onto the row."""
    token = _traceparent.set(traceparent)
    try:
        yield
    finally:
        _traceparent.reset(token)


class ActorTrace:
    """``acting_as(actor)`` and ``traced(traceparent)`` in one block. The worker enters one per
    attempt, so this is a plain class: no generator frames to build and step through."""

    __slots__ = ("_actor", "_actor_token", "_trace_token", "_traceparent")

    def __init__(self, actor: Actor | None, traceparent: str | None) -> None:
        self._actor = actor
        self._traceparent = traceparent

    def __enter__(self) -> Actor | None:
        self._actor_token = _actor.set(self._actor)
        traceparent = self._traceparent
        # A run with no trace, in a task that has none (the worker's): nothing to set, nothing
        # to reset (a set and a reset each build a new context mapping).
        self._trace_token = (
            None
            if traceparent is None and _traceparent.get() is None
            else _traceparent.set(traceparent)
        )
        return self._actor

    def __exit__(self, *exc: object) -> None:
        if self._trace_token is not None:
            _traceparent.reset(self._trace_token)
        _actor.reset(self._actor_token)
