"""The single enqueue keeps a token's fixed facts in process and checks revocation inside its
own insert (``enqueue_insert_live.sql``), or for a coalesced group inside the group's one
insert (``enqueue_many_live.sql``): a revoke and an expiry still hold from the very next
request, cached or not."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, Api, MakeClient, mail, make_api
from tests.services.test_api_group_commit import GatedDriver, request
from ujobs.clock import FrozenClock
from ujobs.drivers.base import Enqueued
from ujobs.drivers.postgres import postgres_driver
from ujobs.services.api.auth import UnauthorizedError
from ujobs.services.api.common import EDGE
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.api.token_guard import PostgresTokenGuard
from ujobs.services.api.tokens import TokenStore
from ujobs.wake.announce import announcing


def known(api: Api) -> KnownTokens:
    app = api.client.app
    assert app is not None
    cache = app[EDGE].known
    assert cache is not None  # Postgres jobs and tokens: the cached path is the one taken
    return cache


async def test_a_cached_token_revoked_is_401_on_its_next_request_and_queues_nothing(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    token = await api.issue("enqueue:*", tenant=ORG_A)
    first = await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()})
    assert first[0] == 202
    assert known(api).get(token.secret) is not None  # its facts are cached now

    await api.tokens.revoke(token.record.id)
    body = {"input": mail(to="b@example.com")}
    status, answer = await api.call("POST", "/v1/jobs/send_mail", token.secret, body)
    assert (status, answer["error"]["code"]) == (401, "X_UNAUTHORIZED")
    assert "revoked" in answer["error"]["message"]
    assert [row["id"] for row in await api.jobs()] == [first[1]["id"]]
    assert known(api).get(token.secret) is None  # forgotten: the next one reads the table


async def test_a_cached_revoked_token_is_401_before_any_other_refusal(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    api = await make_api(aiohttp_client, pg_dsn, pg_pool)
    token = await api.issue("enqueue:send_mail", tenant=ORG_A)
    assert (await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()}))[0] == 202
    await api.tokens.revoke(token.record.id)
    for path, body in (
        ("/v1/jobs/send_mail", {"input": {"to": 1}}),  # bad input: 400 for a live token
        ("/v1/jobs/notify", {"input": {}}),  # no scope: 403 for a live token
    ):
        status, answer = await api.call("POST", path, token.secret, body)
        assert (status, answer["error"]["code"]) == (401, "X_UNAUTHORIZED"), path


async def test_a_cached_token_past_its_expiry_is_401(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]
) -> None:
    clock = FrozenClock()
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock)
    token = await api.issue("enqueue:*", tenant=ORG_A, expires_in_ms=1_000)
    assert (await api.call("POST", "/v1/jobs/send_mail", token.secret, {"input": mail()}))[0] == 202
    assert known(api).get(token.secret) is not None
    clock.advance(1_000)
    body = {"input": mail(to="b@example.com")}
    status, answer = await api.call("POST", "/v1/jobs/send_mail", token.secret, body)
    assert (status, answer["error"]["code"]) == (401, "X_UNAUTHORIZED")
    assert "expired" in answer["error"]["message"]
    assert len(await api.jobs()) == 1


async def test_the_guarded_insert_inserts_nothing_for_a_dead_token(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """The statement itself (not a check before it) refuses: revoked, expired, unknown."""
    clock = FrozenClock()
    driver = postgres_driver(pg_pool, clock=clock)
    store = TokenStore(pg_pool, clock=clock)
    live = await store.create(tenant=None, scopes=["admin"])
    gone = await store.create(tenant=None, scopes=["admin"])
    await store.revoke(gone.record.id)
    expiring = await store.create(tenant=None, scopes=["admin"], expires_in_ms=10)
    clock.advance(10)
    assert await driver.enqueue_while_live(request(1), gone.record.id) is None
    assert await driver.enqueue_while_live(request(2), expiring.record.id) is None
    assert await driver.enqueue_while_live(request(3), "tok_unknown") is None
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 0
    fresh = await driver.enqueue_while_live(request(4), live.record.id)
    assert fresh is not None
    assert not fresh.deduped
    again = await driver.enqueue_while_live(request(4), live.record.id)
    assert again == Enqueued(fresh.id, fresh.run_id, True)  # a live key answers its holder


async def test_a_coalesced_group_checks_its_tokens_in_its_own_insert(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    inner = postgres_driver(pg_pool)
    gated = GatedDriver(inner)
    store = TokenStore(pg_pool)
    guard = PostgresTokenGuard(inner, announcing(inner))
    batcher = EnqueueBatcher(gated, guard=guard)  # type: ignore[arg-type]
    live = await store.create(tenant=None, scopes=["admin"])
    dead = await store.create(tenant=None, scopes=["admin"])

    holder = asyncio.create_task(batcher.enqueue(request(0)))  # holds the one statement slot
    await asyncio.sleep(0.01)
    queued = [
        asyncio.create_task(batcher.enqueue(request(n), token_id=token.record.id))
        for n, token in ((1, live), (2, dead), (3, live), (4, dead))
    ]
    await asyncio.sleep(0.01)
    await store.revoke(dead.record.id)  # after the requests arrived, before their statement
    gated.gate.set()
    await holder
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert [type(r) for r in results] == [Enqueued, UnauthorizedError, Enqueued, UnauthorizedError]
    assert batcher.statements == 2  # the holder's, then ONE for the group, check included
    keys = {row["idempotency_key"] for row in await pg_pool.fetch("select * from x_jobs")}
    assert keys == {"k0", "k1", "k3"}


async def test_the_guarded_group_insert_refuses_only_the_dead_tokens_rows(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    """The statement itself: a dead token's rows are not inserted and the token comes back;
    a live key answers its holder; a repeat of a refused row has no answer of its own."""
    clock = FrozenClock()
    driver = postgres_driver(pg_pool, clock=clock)
    store = TokenStore(pg_pool, clock=clock)
    live = (await store.create(tenant=None, scopes=["admin"])).record.id
    gone = (await store.create(tenant=None, scopes=["admin"])).record.id
    await store.revoke(gone)
    expiring = (await store.create(tenant=None, scopes=["admin"], expires_in_ms=10)).record.id
    clock.advance(10)
    held = await driver.enqueue(request(9))

    group = [request(1), request(2), request(3), request(9), request(5), request(2), request(6)]
    tokens = [live, gone, None, live, expiring, live, "tok_unknown"]
    guarded = await driver.enqueue_many_while_live(group, tokens)

    assert guarded.dead == {gone, expiring, "tok_unknown"}
    answers = guarded.answers
    assert [a is None for a in answers] == [False, True, False, False, True, True, True]
    assert answers[3] == Enqueued(held.id, held.run_id, True)
    assert answers[0] is not None
    assert not answers[0].deduped
    keys = {row["idempotency_key"] for row in await pg_pool.fetch("select * from x_jobs")}
    assert keys == {"k1", "k3", "k9"}


async def test_a_repeat_of_a_refused_request_in_a_group_is_sent_with_its_own_token(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    inner = postgres_driver(pg_pool)
    gated = GatedDriver(inner)
    store = TokenStore(pg_pool)
    batcher = EnqueueBatcher(gated, guard=PostgresTokenGuard(inner, announcing(inner)))  # type: ignore[arg-type]
    live = await store.create(tenant=None, scopes=["admin"])
    dead = await store.create(tenant=None, scopes=["admin"])
    await store.revoke(dead.record.id)

    holder = asyncio.create_task(batcher.enqueue(request(0)))
    await asyncio.sleep(0.01)
    same_key = [
        asyncio.create_task(batcher.enqueue(request(1), token_id=token.record.id))
        for token in (dead, live)
    ]
    await asyncio.sleep(0.01)
    gated.gate.set()
    await holder
    refused, landed = await asyncio.gather(*same_key, return_exceptions=True)
    assert isinstance(refused, UnauthorizedError)
    assert isinstance(landed, Enqueued)
    assert not landed.deduped
    assert await pg_pool.fetchval("select count(*) from x_jobs where idempotency_key = 'k1'") == 1


@pytest.mark.parametrize("size", [1, 3])
def test_known_tokens_stay_bounded(size: int) -> None:
    from ujobs.services.api.tokens import TokenRecord

    cache = KnownTokens(max_size=size)
    for n in range(5):
        cache.remember(f"s{n}", TokenRecord(f"t{n}", None, None, ("admin",), 0))
    assert len(cache) == size
    assert cache.get("s4") is not None
    cache.remember("r", TokenRecord("tr", None, None, ("admin",), 0, revoked_at_ms=1))
    assert cache.get("r") is None  # a revoked token is never kept
