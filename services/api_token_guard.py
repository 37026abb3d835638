"""The single enqueue's token check, made part of the enqueue itself (Postgres only).

The api used to read a token's row and then insert the job: two round trips per request, the
first of them only to learn whether the token was revoked. With the token's fixed facts kept
in process (``services.token_facts``), revocation is the one thing left to read, and the
Postgres driver reads it in the insert's own statement (``enqueue_while_live``): a dead token
inserts nothing and answers 401. A group of requests coalesced by the batcher checks its
tokens in one statement (``TokenStore.live_ids``) just before the group's insert.

Tokens live in Postgres; a job driver elsewhere (Redis) has no statement to fold the check
into, so ``token_guard`` answers None and the api keeps the separate lookup.
"""

from __future__ import annotations

from collections.abc import Collection

from services.tokens import TokenStore
from shared.drivers.base import Enqueued, EnqueueRequest, JobDriver, stores_in
from shared.drivers.postgres.driver import PostgresDriver
from shared.wake.announce import AnnouncingDriver
from shared.wake.protocol import WAKE_DUE_WITHIN_MS


class PostgresTokenGuard:
    """Enqueue while a token is live, announcing the new row like the api's other enqueues."""

    def __init__(self, driver: PostgresDriver, announcing: AnnouncingDriver, store: TokenStore):
        self.driver = driver
        self.announcing = announcing
        self.store = store

    async def enqueue_while_live(self, request: EnqueueRequest, token_id: str) -> Enqueued | None:
        """The enqueue, or None (nothing inserted) when ``token_id`` is no longer live."""
        answer = await self.driver.enqueue_while_live(request, token_id)
        if answer is not None and not answer.deduped:
            due_by = self.driver.clock.now_ms() + WAKE_DUE_WITHIN_MS
            if request.run_at_ms is None or request.run_at_ms <= due_by:
                self.announcing.announce(request.queue)
        return answer

    async def live(self, token_ids: Collection[str]) -> set[str]:
        """Which of ``token_ids`` are live, in one statement."""
        return await self.store.live_ids(token_ids)


def token_guard(
    inner: JobDriver, announcing: AnnouncingDriver, store: TokenStore | None
) -> PostgresTokenGuard | None:
    """The guard when the jobs and the tokens share a database (``inner`` is the Postgres
    driver over the token store's pool), else None."""
    if store is None or not isinstance(inner, PostgresDriver):
        return None
    if not stores_in(inner, store.pool):
        return None
    return PostgresTokenGuard(inner, announcing, store)


__all__ = ["PostgresTokenGuard", "token_guard"]
