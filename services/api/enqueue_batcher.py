"""Group commit of the api's single enqueues: concurrent ``POST /v1/jobs/{name}`` requests
share one ``enqueue_many`` statement (one commit) instead of one statement each.

Natural batching, no timer: a request finding a statement slot free is sent at once, alone,
so an idle api adds no wait at all; requests that arrive while ``max_in_flight`` statements
are running queue up and leave together, up to ``max_batch``, as soon as a slot frees. The
added wait is therefore at most one statement's time (about a millisecond on a local
Postgres), and only under load, which is exactly when a shared commit pays.

Durability is unchanged: each request's future is resolved by the statement that carried
its row, after that statement committed, so a 202 is never sent for a row that could still
roll back. A statement that fails is re-run one request at a time, so a refused request
answers its own error and every other request of its group still lands (inputs are validated
before they get here; what can still fail is the database).

A request may carry the token it came with (``token_id``) when the api took the token's facts
from its cache: then the batcher checks that the token is still live as part of the enqueue
(``ujobs.services.api.token_guard``). A request sent alone goes in the guarded insert's single
statement; a group carrying tokens goes in the guarded group insert's single statement, which
inserts the rows of the live tokens only (one round trip a group, as a group without tokens).
A dead token's request is ``X_UNAUTHORIZED`` and inserts nothing.

``enqueue_group`` is the same for a group someone else already formed (the NATS enqueue
stream's consumer hands over each fetched batch): one guarded statement, sent at once, outside
the single enqueues' slots.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from typing import Protocol

from ujobs.drivers.base import Enqueued, EnqueueRequest, JobDriver
from ujobs.drivers.postgres.enqueue import GuardedAnswers
from ujobs.errors import InvariantError
from ujobs.services.api.auth import UnauthorizedError, revoked

DEFAULT_MAX_BATCH = 256
DEFAULT_MAX_IN_FLIGHT = 1


class TokenGuard(Protocol):
    """Enqueue only while a token is live (``ujobs.services.api.token_guard``)."""

    async def enqueue_while_live(
        self, request: EnqueueRequest, token_id: str
    ) -> Enqueued | None: ...

    async def enqueue_many_while_live(
        self, requests: Sequence[EnqueueRequest], tokens: Sequence[str | None]
    ) -> GuardedAnswers: ...


_Waiter = tuple[EnqueueRequest, "asyncio.Future[Enqueued]", str | None]


class EnqueueBatcher:
    """``enqueue(request)`` answers once the request's own row is committed."""

    def __init__(
        self,
        driver: JobDriver,
        *,
        max_batch: int = DEFAULT_MAX_BATCH,
        max_in_flight: int = DEFAULT_MAX_IN_FLIGHT,
        guard: TokenGuard | None = None,
    ) -> None:
        if max_batch < 1 or max_in_flight < 1:
            raise InvariantError(
                "max_batch and max_in_flight must be at least 1",
                meta={"max_batch": max_batch, "max_in_flight": max_in_flight},
            )
        self.driver = driver
        self.guard = guard
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._waiting: deque[_Waiter] = deque()
        self._in_flight = 0
        self._tasks: set[asyncio.Task[None]] = set()
        self.statements = 0
        """Statements sent so far (a test and the bench read how well requests coalesce)."""

    async def enqueue(self, request: EnqueueRequest, *, token_id: str | None = None) -> Enqueued:
        """``request``'s answer once its row is committed; with ``token_id`` (needs a
        ``guard``), only while that token is live, else ``X_UNAUTHORIZED``."""
        if token_id is not None and self.guard is None:
            raise InvariantError("a token-checked enqueue needs the batcher's guard")
        if self._in_flight < self.max_in_flight and not self._waiting:
            # A free slot and nobody waiting: send it from this task, no hand-off to another.
            self._in_flight += 1
            self.statements += 1
            try:
                return await self._alone(request, token_id)
            finally:
                self._in_flight -= 1
                self._send()
        future: asyncio.Future[Enqueued] = asyncio.get_running_loop().create_future()
        future.add_done_callback(_retrieved)
        self._waiting.append((request, future, token_id))
        self._send()
        # A client that hangs up cancels its handler and so this future, never the statement
        # its row rides in (that runs in a task of its own, which skips a cancelled future).
        # No ``asyncio.shield``: it would cost each request a future and a loop turn more.
        return await future

    async def enqueue_group(
        self, group: Sequence[tuple[EnqueueRequest, str | None]]
    ) -> Sequence[Enqueued | UnauthorizedError]:
        """Each ``(request, token_id)``'s answer, in order, once the live ones' rows are
        committed in one statement: a request whose token (when it names one; needs a
        ``guard``) is no longer live is its ``X_UNAUTHORIZED`` and inserts nothing. A failing
        statement raises (nothing of the group was inserted): the caller retries, one by one."""
        requests = [request for request, _ in group]
        tokens = [token for _, token in group]
        self.statements += 1
        if all(token is None for token in tokens):
            return await self.driver.enqueue_many(requests)
        if self.guard is None:
            raise InvariantError("a token-checked enqueue needs the batcher's guard")
        guarded = await self.guard.enqueue_many_while_live(requests, tokens)
        answers: list[Enqueued | UnauthorizedError] = []
        for (request, token), answer in zip(group, guarded.answers, strict=True):
            if answer is not None:
                answers.append(answer)
            elif token is not None and token in guarded.dead:
                answers.append(revoked(token))
            else:  # it repeats a refused request of the group: alone, on its own token
                self.statements += 1
                try:
                    answers.append(await self._alone(request, token))
                except UnauthorizedError as exc:
                    answers.append(exc)
        return answers

    def _send(self) -> None:
        while self._waiting and self._in_flight < self.max_in_flight:
            count = min(len(self._waiting), self.max_batch)
            batch = [self._waiting.popleft() for _ in range(count)]
            self._in_flight += 1
            task = asyncio.get_running_loop().create_task(self._flush(batch))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _alone(self, request: EnqueueRequest, token_id: str | None) -> Enqueued:
        """One request in one statement: the guarded insert when it carries a token."""
        if token_id is None or self.guard is None:
            return await self.driver.enqueue(request)
        answer = await self.guard.enqueue_while_live(request, token_id)
        if answer is None:
            raise revoked(token_id)
        return answer

    async def _flush(self, batch: list[_Waiter]) -> None:
        try:
            if len(batch) == 1:
                await self._one(batch[0])
                return
            self.statements += 1
            try:
                answers, dead = await self._insert(batch)
            except Exception:
                # One bad row fails the statement: give each request its own answer.
                await asyncio.gather(*(self._one(waiter) for waiter in batch))
                return
            again: list[_Waiter] = []
            for waiter, answer in zip(batch, answers, strict=True):
                _, future, token = waiter
                if answer is None and (token is None or token not in dead):
                    again.append(waiter)  # it repeats a refused request of the group
                elif future.done():
                    continue
                elif answer is None:
                    future.set_exception(revoked(str(token)))
                else:
                    future.set_result(answer)
            # Rare: each sent alone, so it is checked against its own token.
            await asyncio.gather(*(self._one(waiter) for waiter in again))
        finally:
            self._in_flight -= 1
            self._send()

    async def _insert(
        self, batch: list[_Waiter]
    ) -> tuple[Sequence[Enqueued | None], frozenset[str]]:
        """The group's one statement: the guarded one when a request carries a token (each
        answer None whose token, or whose repeated request's token, was found dead; the dead
        tokens come back too), else the driver's ``enqueue_many``."""
        requests = [request for request, _, _ in batch]
        tokens = [token for _, _, token in batch]
        if self.guard is None or all(token is None for token in tokens):
            return await self.driver.enqueue_many(requests), frozenset()
        guarded = await self.guard.enqueue_many_while_live(requests, tokens)
        return guarded.answers, guarded.dead

    async def _one(self, waiter: _Waiter) -> None:
        request, future, token_id = waiter
        self.statements += 1
        try:
            answer = await self._alone(request, token_id)
        except Exception as exc:
            if not future.done():
                future.set_exception(exc)
            return
        if not future.done():
            future.set_result(answer)

    async def close(self) -> None:
        """Wait for the statements in flight (the api's drain)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)


def _retrieved(future: asyncio.Future[Enqueued]) -> None:
    """Mark a failure seen even when its client hung up (no "never retrieved" warning)."""
    if not future.cancelled():
        future.exception()


__all__ = ["DEFAULT_MAX_BATCH", "DEFAULT_MAX_IN_FLIGHT", "EnqueueBatcher", "TokenGuard"]
