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

Whatever a request's handling raises is answered, never left to the requester's timeout: an
error that is not ours is ``X_INTERNAL`` (its message redacted, the traceback in the api's
log), and a reply that cannot be serialised goes without its ``meta``. The log lines of
unexpected errors are rate-limited (``ujobs.services.runtime.log_limit``: one per code per ten
seconds,
the next counting those left out), so a requester repeating a poison body cannot flood the
log.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

from ujobs.errors import UltimateError
from ujobs.services.nats.edge import NatsEdge, answer_bytes, error_body
from ujobs.services.nats.names import NatsNames
from ujobs.services.runtime.log_limit import LogLimiter

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
        self.log_limit = LogLimiter(clock=edge.driver.clock)

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
            code = body["error"]["code"]
            if code == "X_INTERNAL":
                self.log_limit.log(
                    log,
                    logging.ERROR,
                    "ujobs.nats.unhandled",
                    ("unhandled", code),
                    exc_info=exc,
                    subject=msg.subject,
                )
        try:
            await msg.respond(answer_bytes(body))
        except Exception as exc:
            log.warning("ujobs.nats.reply-failed", extra={"subject": msg.subject, "error": exc})


def _auth(msg: Msg) -> str | None:
    headers = msg.headers or {}
    return headers.get("Authorization") or headers.get("authorization")


__all__ = ["DEFAULT_MAX_PENDING", "RequestResponder"]
