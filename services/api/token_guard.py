"""The single enqueue's token check, made part of the enqueue itself (Postgres only).

The api used to read a token's row and then insert the job: two round trips per request, the
first of them only to learn whether the token was revoked. With the token's fixed facts kept
in process (``ujobs.services.api.token_facts``), revocation is the one thing left to read, and the
Postgres driver reads it in the insert's own statement (``enqueue_while_live``): a dead token
inserts nothing and answers 401. A group of requests coalesced by the batcher goes in one
statement too (``enqueue_many_while_live``): each row is inserted only while its token is live,
and the statement says which tokens it found dead.

Tokens live in Postgres; a job driver elsewhere (Redis) has no statement to fold the check
into, so ``token_guard`` answers None and the api keeps the separate lookup.
"""

from __future__ import annotations

from collections.abc import Sequence

from ujobs.drivers.base import Enqueued, EnqueueRequest, JobDriver, stores_in
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.drivers.postgres.enqueue import GuardedAnswers
from ujobs.services.api.tokens import TokenStore
from ujobs.wake.announce import AnnouncingDriver
from ujobs.wake.protocol import WAKE_DUE_WITHIN_MS


class PostgresTokenGuard:
    """Enqueue while a token is live, announcing the new row like the api's other enqueues."""

    def __init__(self, driver: PostgresDriver, announcing: AnnouncingDriver):
        self.driver = driver
        self.announcing = announcing

    async def enqueue_while_live(self, request: EnqueueRequest, token_id: str) -> Enqueued | None:
        """The enqueue, or None (nothing inserted) when ``token_id`` is no longer live."""
        answer = await self.driver.enqueue_while_live(request, token_id)
        if answer is not None:
            self._announce([request], [answer])
        return answer

    async def enqueue_many_while_live(
        self, requests: Sequence[EnqueueRequest], tokens: Sequence[str | None]
    ) -> GuardedAnswers:
        """A group's enqueues in one statement, each only while its token (None: no check)
        is live; which tokens were found dead comes back with the answers."""
        guarded = await self.driver.enqueue_many_while_live(requests, tokens)
        self._announce(requests, guarded.answers)
        return guarded

    def _announce(
        self, requests: Sequence[EnqueueRequest], answers: Sequence[Enqueued | None]
    ) -> None:
        """Each queue that gained a row due within the wake's horizon, once."""
        due_by = self.driver.clock.now_ms() + WAKE_DUE_WITHIN_MS
        queues = dict.fromkeys(
            request.queue
            for request, answer in zip(requests, answers, strict=True)
            if answer is not None
            and not answer.deduped
            # Due a debounce from now: past the wake's horizon the poll finds it.
            and (request.debounce_ms is None or request.debounce_ms <= WAKE_DUE_WITHIN_MS)
            and (request.run_at_ms is None or request.run_at_ms <= due_by)
        )
        for queue in queues:
            self.announcing.announce(queue)


def token_guard(
    inner: JobDriver, announcing: AnnouncingDriver, store: TokenStore | None
) -> PostgresTokenGuard | None:
    """The guard when the jobs and the tokens share a database (``inner`` is the Postgres
    driver over the token store's pool), else None."""
    if store is None or not isinstance(inner, PostgresDriver):
        return None
    if not stores_in(inner, store.pool):
        return None
    return PostgresTokenGuard(inner, announcing)


__all__ = ["PostgresTokenGuard", "token_guard"]
