"""The api's durable pull consumer on ``UJOBS_ENQUEUE``: fire-and-forget enqueues and events.

A producer publishes ``{"input", "runId"?, "delay"?, "debounce"?, "priority"?, "queue"?}`` to
``ujobs.js.enqueue.<job>`` (or ``{"payload"}`` to ``ujobs.js.events.<name>``) with the ``Authorization`` header, through
JetStream, and holds the stream's publish ack. The api takes messages from its ``PullFeed``
(``ujobs.services.nats.pull``) in batches, runs each through ``NatsEdge`` (the HTTP edge's rules),
enqueues a batch's jobs in one statement and one commit (``EnqueueBatcher.enqueue_group``;
each distinct token read as the HTTP edge's single enqueue reads it: its fixed facts from the
api's ``KnownTokens``, its liveness checked in one statement just before the batch's insert,
so a revoke holds from the next batch on) and acks a message only after its row is
committed:

| What happened | The message |
|---|---|
| the row committed (or an earlier delivery's row was met: ``deduped``) | acked |
| refused (bad input, bad, missing or revoked token, scope, tenancy, unknown job: a 4xx code) | its error published to ``ujobs.rejected.<job>`` (events: ``ujobs.rejected.events.<name>``), then terminated: never redelivered |
| the database or the api is away (a 503 code: ``X_DRIVER_UNREACHABLE``, ...): nothing the message did | nak with a delay: delivered again, as long as it takes |
| an unexpected error (any other 5xx: ``X_INTERNAL``, a bug the message trips) | nak with a delay while its delivery count (the message's metadata) is under ``max_deliveries`` (``UJOBS_NATS_MAX_DELIVERIES``, 5); on that delivery, its error published to ``ujobs.rejected.<job>`` and terminated, as a refusal |
| the api died with it in hand | delivered again after the consumer's ``ack_wait`` |
| delivered more than ``REDELIVERY_BOUND`` * ``max_deliveries`` times (the api died with it in hand that often: a message that crashes the process, not an exception) | refused at receipt, untouched: ``X_NATS_REDELIVERED`` on the rejected subject, then terminated |

While the store is away the consumer asks the stream for nothing: the first 503 pauses its
pull requests, and a probe (the api's readiness ping, a second apart, doubling to
``PROBE_MAX_S``) resumes them once the store answers. The messages in hand are nak'd once, so
an outage of any length adds about one delivery to a message, and the receipt bound above is
never reached by waiting out outages: only by a message that keeps killing its api.

So every message ends: acked, or on the rejected subject, within ``max_deliveries``
deliveries when it fails with an error, and within ``REDELIVERY_BOUND`` * ``max_deliveries``
when it takes the process down with it. A poison message holds its place in the
consumer's ``max_ack_pending`` for at most ``max_deliveries - 1`` retry delays (a second each),
then frees it: messages of other tenants behind a flood of them are late, never stranded. A
batch is never held back by one message: the batch's statement goes first with every message
that validated, and one it failed on (or a message that did not validate) is settled alone.
The lines about failing messages are rate-limited (``ujobs.services.runtime.log_limit``): one per reason
(event and code) per ten seconds of the api's clock, the next one counting those left out
(``suppressed``).

A second delivery enqueues nothing new: the job's id is derived from the message
(``stream_job_id``: from its ``Nats-Msg-Id`` header when given, else from the stream's
sequence and timestamp), and an enqueue under an id that names a row inserts nothing. Nor
does it move anything: a message that debounced onto another message's run carries its stream
sequence (``stream_position``, ``EnqueueRequest.debounce_seq``), and the run moves only for a
sequence above the one it took, so a delivery that comes back after a newer message of its key
never puts its older input back. An event
is at-least-once: one delivered again after its row committed but before its ack is published
again (an event has no id a producer names).

The rejected message is ``{"error": {"code", "message", "meta"}, "subject", "streamSeq",
"msgId", "deliveries"}`` (the error as the HTTP edge words it, its message redacted;
``deliveries``: the delivery it was refused on).
"""  # noqa: E501

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError
from nats.js import JetStreamContext

from ujobs.drivers.base import Enqueued, EnqueueRequest
from ujobs.errors import InputInvalidError, UltimateError
from ujobs.ids import derived_id
from ujobs.services.api.auth import Principal, UnauthorizedError
from ujobs.services.api.common import status_for
from ujobs.services.config.variables import DEFAULT_NATS_MAX_DELIVERIES
from ujobs.services.nats.edge import NatsEdge, answer_bytes, error_body
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.pull import PullFeed
from ujobs.services.nats.streams import MAX_ACK_PENDING
from ujobs.services.runtime.log_limit import LogLimiter

log = logging.getLogger("ujobs.nats")

FETCH_BATCH = 512
FETCH_TIMEOUT_S = 1.0
HANDLE_BATCH = 1024
BATCHES_AT_ONCE = 3
RETRY_DELAY_S = 1.0
MAX_DELIVERIES = DEFAULT_NATS_MAX_DELIVERIES
"""The delivery on which a message still failing with an unexpected error is refused."""
REDELIVERY_BOUND = 4
"""Deliveries past ``REDELIVERY_BOUND * max_deliveries`` are refused at receipt: room for the
``max_deliveries`` an error may take plus an api restart or outage per delivery, and a bound
on a message that crashes the process (it never reaches the error path that counts)."""
PROBE_TIMEOUT_S = 2.0
PROBE_MAX_S = 5.0
UNAVAILABLE = 503
MSG_ID = "Nats-Msg-Id"
_V1_TOKENS = 9
_V2_TOKENS = 11  # 12 with the trailing random token; nats-py accepts 11


class StreamRedeliveredError(UltimateError):
    """A stream message delivered more than ``REDELIVERY_BOUND`` * ``UJOBS_NATS_MAX_DELIVERIES``
    times without ending: an api took it and never acked, refused or nak'd it that often (the
    process died with it in hand). It is refused at receipt, untouched, so it cannot take the
    next api down too; the producer reads this on the rejected subject and the api's log has a
    line per reason. Send it again once the cause is found."""

    code = "X_NATS_REDELIVERED"


def stream_position(job: str, msg: Msg) -> tuple[str, int]:
    """The id a stream message's job gets and the message's stream sequence, from one read of
    its reply subject; both are the same on every delivery of that message. The sequence is
    its place in the stream's order (``EnqueueRequest.debounce_seq``: a debounce delivered
    again after a newer one of its key moves nothing)."""
    msg_id = (msg.headers or {}).get(MSG_ID)
    stream, seq, stamp_ns = reply_position(msg.reply)
    if msg_id:
        return derived_id(0, "nats-msg-id", stream, job, msg_id), int(seq)
    stamp = datetime.datetime.fromtimestamp(int(stamp_ns) / 1_000_000_000.0, datetime.UTC)
    return derived_id(int(stamp.timestamp() * 1000), "nats-seq", stream, seq), int(seq)


def stream_job_id(job: str, msg: Msg) -> str:
    """The id a stream message's job gets, the same on every delivery of that message."""
    return stream_position(job, msg)[0]


def reply_position(reply: str | None) -> tuple[str, str, str]:
    """The stream, stream sequence and timestamp (ns) tokens of a JetStream message's reply
    subject (``$JS.ACK.<stream>.<consumer>.<delivered>.<seq>.<cseq>.<ns>.<pending>``, or the
    form with a domain and an account hash before the stream): the fields ``msg.metadata``
    reads, without building its dataclasses and datetime (half the cost of a message's id)."""
    fields = _ack_fields(reply)
    return fields[0], fields[3], fields[5]


def delivery_count(reply: str | None) -> int:
    """How many times this message has been delivered, this time included (the reply
    subject's ``<delivered>`` token: ``msg.metadata.num_delivered``)."""
    return int(_ack_fields(reply)[2])


def _ack_fields(reply: str | None) -> list[str]:
    """A JetStream reply subject's tokens from ``<stream>`` on."""
    tokens = (reply or "").split(".")
    if tokens[:2] == ["$JS", "ACK"]:
        if len(tokens) == _V1_TOKENS:
            return tokens[2:]
        if len(tokens) >= _V2_TOKENS:
            return tokens[4:]
    raise NotJSMessageError


class StreamConsumer:
    """``start()`` / ``stop()`` (both safe twice) run the loop; ``run_once()`` pulls what the
    stream holds and handles it (tests). ``acked`` / ``refused`` / ``retried`` count messages
    (``gave_up``: the refused ones refused for an unexpected error on their last delivery).

    The loop takes every message that has landed (up to ``HANDLE_BATCH``) as one batch and
    handles up to ``BATCHES_AT_ONCE`` batches at a time: while they commit, what lands next
    waits and goes out as the next, larger, batch (one statement, one commit for all)."""

    def __init__(
        self,
        nc: Client,
        js: JetStreamContext,
        edge: NatsEdge,
        names: NatsNames,
        *,
        max_in_flight: int = MAX_ACK_PENDING,
        max_deliveries: int = MAX_DELIVERIES,
        ping: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self.nc = nc
        self.js = js
        self.edge = edge
        self.names = names
        self.max_deliveries = max_deliveries
        self.redelivery_cap = REDELIVERY_BOUND * max_deliveries
        self._ping = ping
        self._probe: asyncio.Task[None] | None = None
        self.log_limit = LogLimiter(clock=edge.driver.clock)
        self._feed = PullFeed(
            nc,
            names.enqueue_stream,
            names.durable,
            window=max_in_flight,
            batch=FETCH_BATCH,
            expires_s=FETCH_TIMEOUT_S,
        )
        self._batches = asyncio.Semaphore(BATCHES_AT_ONCE)
        self._handlers: set[asyncio.Task[None]] = set()
        self._loop: asyncio.Task[None] | None = None
        self.acked = 0
        self.refused = 0
        self.retried = 0
        self.gave_up = 0
        self.redelivered = 0

    @property
    def store_away(self) -> bool:
        """The consumer paused its pull requests until the store answers again."""
        return self._probe is not None

    async def start(self) -> None:
        if self._loop is not None:
            return
        await self._feed.start()
        self._loop = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        """Stop asking (within one fetch timeout), then finish every message in hand."""
        await self._feed.stop()
        probe, self._probe = self._probe, None
        if probe is not None:
            probe.cancel()
            await asyncio.gather(probe, return_exceptions=True)
        loop, self._loop = self._loop, None
        if loop is not None:
            await asyncio.gather(loop, return_exceptions=True)
        while self._handlers:
            await asyncio.gather(*list(self._handlers), return_exceptions=True)
        await self._feed.close()

    async def run_once(self, *, batch: int = FETCH_BATCH, timeout_s: float = 2.0) -> int:
        """Pull up to ``batch`` messages and handle them all; answers how many came."""
        msgs = self._feed.take_now(batch)
        if not msgs:
            await self._feed.pull_once(batch, timeout_s)
            msgs = self._feed.take_now(batch)
        try:
            await self.handle_batch(msgs)
        finally:
            self._feed.done(len(msgs))
        return len(msgs)

    async def _run(self) -> None:
        while True:
            await self._batches.acquire()
            msgs = await self._feed.take(HANDLE_BATCH)
            if not msgs:
                self._batches.release()
                return
            task = asyncio.get_running_loop().create_task(self.handle_batch(msgs))
            self._handlers.add(task)
            task.add_done_callback(functools.partial(self._handled, count=len(msgs)))

    def _handled(self, task: asyncio.Task[None], count: int) -> None:
        self._handlers.discard(task)
        self._batches.release()
        self._feed.done(count)
        if not task.cancelled() and task.exception() is not None:
            log.warning("ujobs.nats.batch-failed", extra={"error": task.exception()})

    async def handle_batch(self, msgs: list[Msg]) -> None:
        """A fetched batch's enqueues in one statement, each distinct token read as the single
        enqueue reads it (``NatsEdge.stream_principal``: a token seen live before, on any edge
        of this api, answers from ``KnownTokens``) and those not read now checked live just
        before the statement (``EnqueueBatcher.enqueue_group``): a revoke holds from the next
        batch on. A message whose token was found dead is refused; events, other refusals, and
        every message of a batch whose statement failed go through ``handle`` one by one."""
        principals: dict[str | None, tuple[Principal, str | None] | None] = {}
        ready: list[tuple[Msg, EnqueueRequest, str | None]] = []
        alone: list[Msg] = []
        worn: list[Msg] = []
        for msg in msgs:
            if self._worn_out(msg):
                worn.append(msg)
                continue
            job = self.names.tail(msg.subject, self.names.js_enqueue_wildcard)
            if job is None:
                alone.append(msg)
                continue
            auth = (msg.headers or {}).get("Authorization")
            if auth not in principals:
                try:
                    principals[auth] = await self.edge.stream_principal(auth)
                except Exception:
                    principals[auth] = None
            caller = principals[auth]
            if caller is None:
                alone.append(msg)
                continue
            try:
                job_id, seq = stream_position(job, msg)
                req = self.edge.request(caller[0], job, msg.data, job_id=job_id, debounce_seq=seq)
            except Exception:
                alone.append(msg)
                continue
            ready.append((msg, req, caller[1]))
        if ready:
            try:
                answers = await self.edge.batcher.enqueue_group(
                    [(req, token) for _, req, token in ready]
                )
            except Exception:
                alone.extend(msg for msg, _, _ in ready)
            else:
                await self._settle_group(ready, answers)
        if alone:
            await asyncio.gather(*(self.handle(msg) for msg in alone))
        if worn:
            await asyncio.gather(*(self._refuse_worn(msg) for msg in worn))

    def _worn_out(self, msg: Msg) -> bool:
        """Delivered past the receipt bound (a message that is not JetStream's is not)."""
        try:
            return delivery_count(msg.reply) > self.redelivery_cap
        except NotJSMessageError:
            return False

    async def _refuse_worn(self, msg: Msg) -> None:
        delivered = delivery_count(msg.reply)
        job = self.names.tail(msg.subject, self.names.js_enqueue_wildcard)
        event = self.names.tail(msg.subject, self.names.js_events_wildcard)
        what = job if job is not None else f"events.{event}"
        error = StreamRedeliveredError(
            f"delivered {delivered} times without ending (the bound is {self.redelivery_cap}): "
            "an api took it and died with it in hand each time; refused untouched",
            meta={"deliveries": delivered, "bound": self.redelivery_cap},
        )
        self.log_limit.warn(
            log,
            "ujobs.nats.enqueue-redelivered",
            ("redelivered", error.code),
            subject=msg.subject,
            code=error.code,
            deliveries=delivered,
        )
        self.redelivered += 1
        with contextlib.suppress(Exception):
            await self._refuse(msg, error_body(error), what)

    async def _settle_group(
        self,
        ready: list[tuple[Msg, EnqueueRequest, str | None]],
        answers: Sequence[Enqueued | UnauthorizedError],
    ) -> None:
        """Ack each committed message; refuse each one whose token was found dead."""
        acked = 0
        for (msg, _, _), answer in zip(ready, answers, strict=True):
            if isinstance(answer, UnauthorizedError):
                self.edge.forget((msg.headers or {}).get("Authorization"))
                job = self.names.tail(msg.subject, self.names.js_enqueue_wildcard)
                await self._refuse(msg, error_body(answer), job or "")
                continue
            # Acks are buffered publishes: written together by the client's flusher.
            await msg.ack()
            acked += 1
        self.acked += acked

    async def handle(self, msg: Msg) -> None:
        """Enqueue (or publish) one message; ack, terminate or nak it as the table says."""
        auth = (msg.headers or {}).get("Authorization")
        job = self.names.tail(msg.subject, self.names.js_enqueue_wildcard)
        event = self.names.tail(msg.subject, self.names.js_events_wildcard)
        try:
            if job is not None:
                job_id, seq = stream_position(job, msg)
                await self.edge.enqueue(job, msg.data, auth, job_id=job_id, debounce_seq=seq)
            elif event is not None:
                await self.edge.publish(event, msg.data, auth)
            else:
                raise InputInvalidError(
                    f"{msg.subject!r} is neither an enqueue nor an event subject",
                    meta={"subject": msg.subject},
                )
        except Exception as exc:
            await self._failed(msg, exc, job if job is not None else f"events.{event}")
            return
        await msg.ack()
        self.acked += 1

    async def _failed(self, msg: Msg, exc: Exception, what: str) -> None:
        """Refuse, retry or give up on a message whose handling raised ``exc`` (the table in
        the module's doc). The lines it writes are rate-limited: a flood of poison messages
        is one line per reason per window, not one per delivery."""
        body = error_body(exc)
        code = body["error"]["code"]
        status = status_for(code)
        if status < 500:
            await self._refuse(msg, body, what)
            return
        delivered = delivery_count(msg.reply)
        # A 503's traceback says nothing (the database is away); an unexpected error's is
        # the only trace of the bug behind it (the rejected message says "the api logged it").
        detail = None if status == UNAVAILABLE else exc
        if status != UNAVAILABLE and delivered >= self.max_deliveries:
            self.log_limit.warn(
                log,
                "ujobs.nats.enqueue-gave-up",
                ("gave-up", code),
                exc_info=detail,
                subject=msg.subject,
                code=code,
                deliveries=delivered,
                error=exc,
            )
            self.gave_up += 1
            await self._refuse(msg, body, what)
            return
        self.log_limit.warn(
            log,
            "ujobs.nats.enqueue-retried",
            ("retried", code),
            exc_info=detail,
            subject=msg.subject,
            code=code,
            deliveries=delivered,
            error=exc,
        )
        if status == UNAVAILABLE:
            self._pause_until_store_answers()
        self.retried += 1
        with contextlib.suppress(Exception):
            await msg.nak(delay=RETRY_DELAY_S)

    def _pause_until_store_answers(self) -> None:
        """Ask the stream for nothing until the store answers (the module's doc): without a
        ping (tests' consumers), one retry delay."""
        if self._probe is not None or self._loop is None:
            return
        self._feed.pause()
        log.warning("ujobs.nats.store-away", extra={"pausedFor": "the store to answer"})
        self._probe = asyncio.get_running_loop().create_task(self._wait_for_store())

    async def _wait_for_store(self) -> None:
        delay = RETRY_DELAY_S
        try:
            while True:
                await asyncio.sleep(delay)
                if self._ping is None:
                    break
                try:
                    await asyncio.wait_for(self._ping(), PROBE_TIMEOUT_S)
                except Exception:
                    delay = min(delay * 2, PROBE_MAX_S)
                    continue
                break
        finally:
            self._probe = None
            self._feed.resume()
        log.info("ujobs.nats.store-back", extra={"resumed": True})

    async def _refuse(self, msg: Msg, body: dict[str, Any], what: str) -> None:
        """Tell the producer (``rejected``), then terminate: published before the term, so a
        crash between the two re-sends the error rather than losing it."""
        md = msg.metadata
        rejected = {
            **body,
            "subject": msg.subject,
            "streamSeq": md.sequence.stream,
            "msgId": (msg.headers or {}).get(MSG_ID),
            "deliveries": md.num_delivered,
        }
        await self.nc.publish(self.names.rejected_subject(what), answer_bytes(rejected))
        await msg.term()
        self.refused += 1


__all__ = [
    "MAX_DELIVERIES",
    "REDELIVERY_BOUND",
    "StreamConsumer",
    "StreamRedeliveredError",
    "delivery_count",
    "reply_position",
    "stream_job_id",
]
