"""The api's durable pull consumer as a feed of message batches, asked for by hand.

nats-py's ``fetch`` waits for every message with a task of its own (``next_msg``: a task, a
``wait_for`` and a uuid per message), which made it a third of the consumer's profile. A
``PullFeed`` instead subscribes one inbox with a callback and sends the consumer's pull
requests (``$JS.API.CONSUMER.MSG.NEXT.<stream>.<durable>``, reply to that inbox) itself:
messages land in a list, ``take()`` hands out everything that has landed, ``done(n)`` says
``n`` of them are finished (acked, terminated or nak'd).

| Request | Sent when | Ends |
|---|---|---|
| ``{"batch": b, "expires": expires_s}`` (the loop, ``start()``) | the previous one ended and at least ``batch // 4`` of the ``window`` are free (messages asked for or in hand but not ``done``); a second after one refused (409: consumer deleted, ...; 503: no consumer) | ``b`` messages came, or a status (408 expired, 409, 503; 100, a heartbeat, does not end it), or ``expires_s`` + a second passed without either (NATS reconnected: the request is gone) |
| (none) | while ``pause()``d (the consumer found the store away), until ``resume()`` | |
| ``{"batch": b, "no_wait": true}`` (``pull_once``, tests) | called | at once: what the stream holds now, then 404; when that was nothing, one ``{"batch": b, "expires": timeout}`` after it, waited for until a message lands |

The window is the api's bound on messages in hand (the consumer's ``max_ack_pending`` is the
server's). ``stop()`` sends no more requests, waits for the current one to end (at most
``expires_s``), and leaves what it delivered for ``take()``: a message is never dropped in
hand, it is finished or, with the process gone, delivered again after ``ack_wait``.
"""  # noqa: E501

from __future__ import annotations

import asyncio
import contextlib
import logging

import orjson
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription

log = logging.getLogger("ujobs.nats")

JS_API = "$JS.API"
STATUS = "Status"
HEARTBEAT = "100"
REQUEST_GRACE_S = 1.0
RETRY_S = 1.0


class PullFeed:
    """``start()`` / ``stop()`` (both safe twice) run the request loop; ``pull_once()`` asks
    once without it (tests); ``take()`` and ``done()`` are the consumer's side."""

    def __init__(
        self,
        nc: Client,
        stream: str,
        durable: str,
        *,
        window: int,
        batch: int,
        expires_s: float,
    ) -> None:
        self.nc = nc
        self.window = window
        self.batch = min(batch, window)
        self.expires_s = expires_s
        self._next_subject = f"{JS_API}.CONSUMER.MSG.NEXT.{stream}.{durable}"
        self._inbox = nc.new_inbox()
        self._sub: Subscription | None = None
        self._ready: list[Msg] = []
        self._landed = asyncio.Event()
        self._request_over = asyncio.Event()
        self._changed = asyncio.Event()
        self._asked = 0
        self._held = 0
        self._loop: asyncio.Task[None] | None = None
        self._stopping = False
        self._finished = False
        self._refused = False
        self._paused = False
        self.requests = 0

    def pause(self) -> None:
        """Send no new pull request until ``resume()`` (the one out still ends): nothing is
        delivered to a consumer that cannot land it, so a message's delivery count does not
        grow while the store is away."""
        self._paused = True

    def resume(self) -> None:
        self._paused = False
        self._changed.set()

    @property
    def paused(self) -> bool:
        return self._paused

    @property
    def free(self) -> int:
        """How many more messages may be asked for."""
        return self.window - self._held - self._asked

    async def _subscribe(self) -> None:
        if self._sub is None:
            self._sub = await self.nc.subscribe(self._inbox, cb=self._on_message)

    async def _on_message(self, msg: Msg) -> None:
        status = msg.headers.get(STATUS) if msg.headers else None
        if status is None:
            self._ready.append(msg)
            self._held += 1
            self._asked = max(0, self._asked - 1)
            self._landed.set()
            if self._asked == 0:
                self._request_over.set()
        elif status != HEARTBEAT:
            # 404 (nothing now), 408 (expired), 409 (max waiting, consumer deleted, ...):
            # this request gives no more.
            if status not in ("404", "408"):
                log.warning("ujobs.nats.pull-status", extra={"status": status, "error": msg.data})
                self._refused = True
            self._asked = 0
            self._request_over.set()

    async def start(self) -> None:
        if self._loop is not None:
            return
        self._stopping = False
        self._finished = False
        await self._subscribe()
        self._loop = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """No more requests; the one out ends (its messages stay for ``take``)."""
        self._stopping = True
        self._changed.set()
        self._landed.set()
        loop, self._loop = self._loop, None
        if loop is not None:
            await asyncio.gather(loop, return_exceptions=True)
        self._finished = True
        self._landed.set()

    async def close(self) -> None:
        """Stop, then stop listening (messages still landing are delivered again later)."""
        await self.stop()
        sub, self._sub = self._sub, None
        if sub is not None:
            with contextlib.suppress(Exception):
                await sub.unsubscribe()

    async def _ask(self, batch: int, *, expires_s: float | None) -> None:
        """One pull request: ``expires_s`` None is ``no_wait`` (answer at once)."""
        body: dict[str, object] = {"batch": batch}
        if expires_s is None:
            body["no_wait"] = True
        else:
            body["expires"] = int(expires_s * 1_000_000_000)
        self._request_over.clear()
        self._refused = False
        self.requests += 1
        self._asked = batch
        await self.nc.publish(self._next_subject, orjson.dumps(body), reply=self._inbox)

    async def _run(self) -> None:
        least = max(1, self.batch // 4)
        while not self._stopping:
            if self._paused or self.free < least:
                self._changed.clear()
                await self._changed.wait()
                continue
            try:
                await self._ask(min(self.batch, self.free), expires_s=self.expires_s)
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(
                        self._request_over.wait(), self.expires_s + REQUEST_GRACE_S
                    )
                if self._refused:
                    # 409 (consumer deleted, ...) or 503 (no consumer): not again at once.
                    await asyncio.sleep(RETRY_S)
            except Exception as exc:
                # NATS away (reconnecting): ask again once it may be back.
                log.warning("ujobs.nats.pull-failed", extra={"error": exc})
                await asyncio.sleep(RETRY_S)
            self._asked = 0

    async def pull_once(self, batch: int, timeout_s: float) -> None:
        """Ask for what the stream holds now; when that is nothing, wait up to ``timeout_s``
        for the first message to come."""
        await self._subscribe()
        await self._ask(batch, expires_s=None)
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self._request_over.wait(), timeout_s)
        if not self._ready:
            self._landed.clear()
            await self._ask(batch, expires_s=timeout_s)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._landed.wait(), timeout_s + REQUEST_GRACE_S)
        self._asked = 0

    async def take(self, most: int) -> list[Msg]:
        """Up to ``most`` landed messages, waiting for one; [] once stopped and empty."""
        while not self._ready:
            if self._finished:
                return []
            self._landed.clear()
            await self._landed.wait()
        return self.take_now(most)

    def take_now(self, most: int) -> list[Msg]:
        msgs, self._ready = self._ready[:most], self._ready[most:]
        return msgs

    def done(self, count: int) -> None:
        """``count`` taken messages are finished: their room in the window is free again."""
        self._held = max(0, self._held - count)
        self._changed.set()


__all__ = ["PullFeed"]
