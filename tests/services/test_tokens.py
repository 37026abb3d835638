"""Tokens: only a hash is stored, expiry and revocation hold from the next lookup, scopes and
tenancy rules (``ujobs.services.api.auth``), and ``ujobs tokens create | list | revoke``."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Iterable
from typing import Any

import asyncpg
import pytest

from tests.support.cli import json_of, ujobs
from tests.support.pg_relay import PgRelay
from ujobs.clock import FrozenClock
from ujobs.drivers.postgres.pool import postgres_pool
from ujobs.errors import ConfigInvalidError, DriverUnreachableError, TenancyActorMismatchError
from ujobs.services.api.auth import ForbiddenError, Principal, UnauthorizedError, authenticate
from ujobs.services.api.tokens import (
    BatchedLookup,
    TokenNotFoundError,
    TokenRecord,
    TokenStore,
    parse_scopes,
)


async def test_only_the_hash_is_stored(pg_pool: asyncpg.Pool[Any]) -> None:
    store = TokenStore(pg_pool)
    issued = await store.create(tenant="org-a", scopes=["enqueue:*", "read"], name="ci")
    assert issued.secret.startswith("ujobs_")
    row = await pg_pool.fetchrow("select * from x_api_tokens")
    assert row is not None
    assert bytes(row["hash"]) == hashlib.sha256(issued.secret.encode()).digest()
    stored_text = " ".join(str(v) for v in dict(row).values())
    assert issued.secret not in stored_text
    assert issued.secret[len("ujobs_") :] not in stored_text
    found = await store.find(issued.secret)
    assert found is not None
    assert (found.id, found.tenant_id, found.scopes, found.name) == (
        issued.record.id,
        "org-a",
        ("enqueue:*", "read"),
        "ci",
    )
    assert await store.find(issued.secret + "x") is None


async def test_expiry_and_revocation_hold_from_the_next_lookup(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    clock = FrozenClock()
    store = TokenStore(pg_pool, clock=clock)
    short = await store.create(tenant=None, scopes=["read"], expires_in_ms=60_000)
    bearer = f"Bearer {short.secret}"
    principal = await authenticate(store, bearer, clock.now_ms())
    assert principal.operator
    assert principal.token_id == short.record.id
    clock.advance(59_999)
    await authenticate(store, bearer, clock.now_ms())
    clock.advance(1)
    with pytest.raises(UnauthorizedError, match="expired"):
        await authenticate(store, bearer, clock.now_ms())

    kept = await store.create(tenant="org-a", scopes=["read"])
    await authenticate(store, f"Bearer {kept.secret}", clock.now_ms())
    await store.revoke(kept.record.id)
    with pytest.raises(UnauthorizedError, match="revoked"):
        await authenticate(store, f"Bearer {kept.secret}", clock.now_ms())
    with pytest.raises(TokenNotFoundError):
        await store.revoke("tok_nobody")


@pytest.mark.parametrize(
    "header", [None, "", "Basic abc", "Bearer ", "Bearer ujobs_not-a-token", "ujobs_x"]
)
async def test_missing_or_unknown_credentials_are_unauthorized(
    pg_pool: asyncpg.Pool[Any], header: str | None
) -> None:
    with pytest.raises(UnauthorizedError) as caught:
        await authenticate(TokenStore(pg_pool), header, 0)
    assert caught.value.code == "X_UNAUTHORIZED"


def test_scopes() -> None:
    tenant = Principal("tok_1", "org-a", frozenset({"enqueue:send_mail", "read"}))
    assert tenant.allows("enqueue:send_mail")
    assert tenant.allows("read")
    assert not tenant.allows("enqueue:refund")
    assert not tenant.allows("operate")
    with pytest.raises(ForbiddenError, match="operate"):
        tenant.require("operate")
    wildcard = Principal("tok_2", "org-a", frozenset({"enqueue:*"}))
    assert wildcard.allows("enqueue:anything")
    assert not wildcard.allows("read")
    admin = Principal("tok_3", None, frozenset({"admin"}))
    assert all(admin.allows(s) for s in ("read", "operate", "events:publish", "enqueue:x"))
    assert parse_scopes("read, enqueue:*,read") == ("enqueue:*", "read")
    for bad in ("", "write", "enqueue:", "enqueue:a b"):
        with pytest.raises(ConfigInvalidError):
            parse_scopes(bad)


def test_tenancy_rules() -> None:
    tenant = Principal("tok_1", "org-a", frozenset({"enqueue:*"}))
    tenant.check_enqueue_tenant("send_mail", "org-a")
    for other in ("org-b", None):
        with pytest.raises(TenancyActorMismatchError):
            tenant.check_enqueue_tenant("send_mail", other)
    assert tenant.sees("org-a")
    assert not tenant.sees("org-b")
    assert not tenant.sees(None)
    with pytest.raises(ForbiddenError, match="operator"):
        tenant.require_operator("listing queues")
    operator = Principal("tok_2", None, frozenset({"read"}))
    operator.check_enqueue_tenant("send_mail", "org-b")
    operator.require_operator("listing queues")
    assert operator.sees("org-b")
    assert operator.sees(None)
    assert tenant.actor().id == "tok_1"
    assert tenant.actor().org_id == "org-a"


def test_cli_create_list_revoke(pg_dsn: str) -> None:
    created = json_of(
        ujobs(
            "tokens", "create", "--tenant", "org-a", "--scopes", "enqueue:*,read",
            "--name", "ci", "--expires", "30d", "--json", dsn=pg_dsn,
        )
    )  # fmt: skip
    assert set(created) == {"id", "token", "tenant", "scopes"}
    assert created["tenant"] == "org-a"
    assert created["scopes"] == ["enqueue:*", "read"]
    assert created["token"].startswith("ujobs_")
    plain = ujobs("tokens", "create", "--operator", "--scopes", "admin", dsn=pg_dsn)
    assert plain.exit_code == 0, plain.output
    assert plain.stdout.strip().startswith("ujobs_")
    listed = json_of(ujobs("tokens", "list", "--json", dsn=pg_dsn))["tokens"]
    assert len(listed) == 2
    assert created["token"] not in str(listed)
    mine = next(t for t in listed if t["id"] == created["id"])
    assert mine["name"] == "ci"
    assert mine["revokedAtMs"] is None
    assert mine["expiresAtMs"] - mine["createdAtMs"] == 30 * 86_400_000
    assert [t["operator"] for t in listed if t["id"] != created["id"]] == [True]
    revoked = json_of(ujobs("tokens", "revoke", created["id"], "--json", dsn=pg_dsn))
    assert revoked == {"id": created["id"], "revoked": True}
    again = json_of(ujobs("tokens", "list", "--json", dsn=pg_dsn))["tokens"]
    assert next(t for t in again if t["id"] == created["id"])["revokedAtMs"] is not None
    unknown = ujobs("tokens", "revoke", "tok_nobody", "--json", dsn=pg_dsn)
    assert unknown.exit_code == 1
    assert json_of(unknown)["error"]["code"] == "X_TOKEN_NOT_FOUND"


@pytest.mark.parametrize(
    "args",
    [
        ("--scopes", "read"),
        ("--tenant", "org-a", "--operator", "--scopes", "read"),
        ("--tenant", "org-a", "--scopes", "write"),
        ("--tenant", "org-a", "--scopes", "read", "--expires", "3 days"),
        ("--tenant", "org-a", "--scopes", "read", "--expires", "0s"),
    ],
)
def test_cli_create_refuses_bad_flags(pg_dsn: str, args: tuple[str, ...]) -> None:
    result = ujobs("tokens", "create", *args, "--json", dsn=pg_dsn)
    assert result.exit_code == 1
    assert json_of(result)["error"]["code"] == "X_CONFIG_INVALID"
    assert json_of(ujobs("tokens", "list", "--json", dsn=pg_dsn)) == {"tokens": []}


class CountingStore(TokenStore):
    def __init__(self, pool: asyncpg.Pool[Any]) -> None:
        super().__init__(pool)
        self.statements: list[int] = []

    async def find_many(self, secrets: Iterable[str]) -> dict[str, TokenRecord]:
        asked = list(secrets)
        self.statements.append(len(asked))
        return await super().find_many(asked)


async def test_concurrent_lookups_share_a_statement_and_cache_nothing(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    store = CountingStore(pg_pool)
    lookup = BatchedLookup(store)
    a = await store.create(tenant="org-a", scopes=["read"])
    b = await store.create(tenant="org-b", scopes=["read"])
    asked = [a.secret, b.secret, "ujobs_unknown", a.secret] * 5
    found = await asyncio.gather(*(lookup.find(s) for s in asked))
    assert [None if r is None else r.tenant_id for r in found[:4]] == [
        "org-a",
        "org-b",
        None,
        "org-a",
    ]
    # The first went alone; the other 19 (three secrets) waited for it and shared the next.
    assert store.statements == [1, 3]
    await store.revoke(a.record.id)
    again = await lookup.find(a.secret)
    assert again is not None
    assert again.revoked_at_ms is not None


async def test_a_lookup_on_a_session_postgres_ended_is_unreachable_and_its_connection_dropped(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    # Issue 29's "cannot switch to state 12; another operation (2) is in progress": not two
    # statements on one connection, but an idle pooled connection that READ the FATAL of a
    # restart and had not read the close yet (state 2 is asyncpg consuming that error). The
    # relay holds the close back, so the gap lasts; the pool has one connection, so the
    # lookups after it show the ended session is never used again.
    issued = await TokenStore(pg_pool).create(tenant="org-a", scopes=["read"])
    relay = await PgRelay(pg_dsn).start()
    relay.hold_close = True
    pool = await postgres_pool(relay.dsn, min_size=1, max_size=1)
    lookup = BatchedLookup(TokenStore(pool))
    admin = await asyncpg.connect(pg_dsn)
    try:
        assert await lookup.find(issued.secret) is not None
        victim = await pool.fetchval("select pg_backend_pid()")
        await admin.execute("select pg_terminate_backend($1)", victim)
        await relay.until_withheld(1)
        await asyncio.sleep(0)  # the client reads what the relay forwarded
        with pytest.raises(DriverUnreachableError) as info:
            await lookup.find(issued.secret)
        assert info.value.meta["cause"] == "InternalClientError"
        found = await asyncio.gather(*(lookup.find(issued.secret) for _ in range(5)))
        assert [None if r is None else r.id for r in found] == [issued.record.id] * 5
        assert await pool.fetchval("select pg_backend_pid()") != victim
    finally:
        await admin.close()
        await relay.close()
        pool.terminate()
