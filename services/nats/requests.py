"""Request/reply on ``ujobs.enqueue.<job>`` and ``ujobs.events.<name>``.

The api subscribes to both wildcards in the queue group ``<prefix>-api`` (so each request is
answered by one api replica) and answers each request from a task of its own: nats-py runs a
subscription's callback one message at a time, and an enqueue waits for its commit, so
answering inline would serialise every requester behind one database round trip. At most
``max_pending`` requests are in hand at once; past that the next message waits in the
subscription's buffer (NATS's own flow control), never dropped.

The reply is sent after the row is committed: ``{"id", "runId", "deduped"}`` (an event:
``{"id", "name", "publishedAtMs", "expiresAtMs"}``) or ``{"error": {"code", "message",
"meta"}}`` with the HTTP edge's codes, the per-token rate limit's ``X_RATE_LIMITED`` (with
``meta.retryAfterMs``) included. A message without a reply subject is answered nowhere,
so it is not acted on either (fire-and-forget goes through the enqueue stream).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from services.nats.edge import NatsEdge, error_body
from services.nats.names import NatsNames
from shared.errors import UltimateError

log = logging.getLogger("ujobs.nats")

DEFAULT_MAX_PENDING = 512


class RequestResponder:
    """``start()`` subscribes, ``stop()`` unsubscribes and waits for the answers in hand."""

    def __init__(
        self,
        nc: Client,
        edge: NatsEdge,
        names: NatsNames,
        *,
        max_pending: int = DEFAULT_MAX_PENDING,
    ) -> None:
        self.nc = nc
        self.edge = edge
        self.names = names
        self._slots = asyncio.Semaphore(max_pending)
        self._tasks: set[asyncio.Task[None]] = set()
        self._subs: list[Subscription] = []

    async def start(self) -> None:
        if self._subs:
            return
        group = self.names.durable
        self._subs = [
            await self.nc.subscribe(self.names.enqueue_wildcard, queue=group, cb=self._on_enqueue),
            await self.nc.subscribe(self.names.events_wildcard, queue=group, cb=self._on_event),
        ]

    async def stop(self) -> None:
        subs, self._subs = self._subs, []
        for sub in subs:
            try:
                await sub.unsubscribe()
            except Exception as exc:  # the connection may already be closed
                log.debug("ujobs.nats.unsubscribe-failed", extra={"error": exc})
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def _on_enqueue(self, msg: Msg) -> None:
        job = self.names.tail(msg.subject, self.names.enqueue_wildcard)
        await self._spawn(
            msg, lambda: self.edge.enqueue(job or "", msg.data, _auth(msg), limited=True)
        )

    async def _on_event(self, msg: Msg) -> None:
        name = self.names.tail(msg.subject, self.names.events_wildcard)
        await self._spawn(
            msg, lambda: self.edge.publish(name or "", msg.data, _auth(msg), limited=True)
        )

    async def _spawn(self, msg: Msg, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        if not msg.reply:
            return
        await self._slots.acquire()
        task = asyncio.get_running_loop().create_task(self._answer(msg, work))
        self._tasks.add(task)
        task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._slots.release()

    async def _answer(self, msg: Msg, work: Callable[[], Awaitable[dict[str, Any]]]) -> None:
        try:
            body = await work()
        except UltimateError as exc:
            body = error_body(exc)
        except Exception as exc:
            body = error_body(exc)
            if body["error"]["code"] == "X_INTERNAL":
                log.exception("ujobs.nats.unhandled", extra={"subject": msg.subject})
        try:
            await msg.respond(orjson.dumps(body))
        except Exception as exc:
            log.warning("ujobs.nats.reply-failed", extra={"subject": msg.subject, "error": exc})


def _auth(msg: Msg) -> str | None:
    headers = msg.headers or {}
    return headers.get("Authorization") or headers.get("authorization")


__all__ = ["DEFAULT_MAX_PENDING", "RequestResponder"]
