"""What a NATS message asks for, done the HTTP edge's way: one implementation of enqueue and
``publish_event`` behind tokens, scopes and tenancy, for the request/reply subjects and the
enqueue stream's consumer alike.

``NatsEdge.enqueue(job, data, authorization)`` is the HTTP edge's single enqueue
(``ujobs.services.api.enqueue.enqueue_one``, one implementation): it reads ``{"input", "runId"?,
"delay"?, "debounce"?, "priority"?, "queue"?, "onConflict"?}`` (the stream form: no
``onConflict``), authenticates the ``Authorization: Bearer …`` header (a token seen live before
answers from the api's ``KnownTokens`` and its insert checks it was not revoked, as on HTTP),
needs the scope ``enqueue:<job>``, validates the input through the job's own
``JobHandle.request`` (schema, idempotency key, ``tenant(input)``, the tenant token's rule) and
answers ``{"id", "runId", "deduped", "debounced"}`` once the row is committed (``debounced``: a
run of the key, in the token's tenant, that had not started was moved to now + debounce with
this input); with ``"onConflict": "error"`` a live run holding the key is ``X_JOB_DUPLICATE``
(``meta.id`` names it) and nothing is queued.
``publish(name, data, authorization)`` reads ``{"payload"}`` and needs ``events:publish``; the
event carries the token's tenant, so it resumes only that tenant's waits (an operator's, all).
``limited=True`` (the request/reply form) spends one request of the token's bucket first:
the HTTP edge's ``TokenBuckets`` (``UJOBS_API_RATE_PER_TOKEN``), the same instance in the
api, so a token's rate counts its HTTP and NATS requests together; over it is
``X_RATE_LIMITED`` with ``meta.retryAfterMs``, as HTTP's 429 body. The stream form is never
throttled: a refused stream message is terminated, so throttling it would drop work the
producer was promised; the stream is its buffer and the consumer's pace its limit.
A refusal raises the ``UltimateError`` the HTTP edge raises for the same body;
``error_body`` is its wire shape, ``{"error": {"code", "message", "meta"}}``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

import asyncpg
import orjson

from ujobs.drivers.base import EnqueueRequest, JobDriver
from ujobs.errors import InputInvalidError, UltimateError
from ujobs.events.bus import publish_event
from ujobs.jobs.registry import Registry
from ujobs.limits import check_text, depth_refused, too_deep_to_parse
from ujobs.services.api.auth import (
    Principal,
    TokenLookup,
    UnauthorizedError,
    authenticate,
    bearer_secret,
)
from ujobs.services.api.enqueue import (
    SINGLE_FIELDS,
    STREAM_FIELDS,
    enqueue_one,
    enqueue_principal,
    single_request,
)
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.ratelimit import TokenBuckets
from ujobs.services.api.token_facts import KnownTokens
from ujobs.services.redact import redact_text

DEFAULT_MAX_MESSAGE_BYTES = 1_048_576
"""The largest message body the edge reads (NATS's own default ``max_payload``)."""

_EVENT_FIELDS = frozenset({"payload"})


class MessageTooLargeError(UltimateError):
    code = "X_BODY_TOO_LARGE"


def parse_object(data: bytes, allowed: frozenset[str], max_bytes: int) -> dict[str, Any]:
    """The message body as a JSON object whose keys are all in ``allowed``."""
    if len(data) > max_bytes:
        raise MessageTooLargeError(
            f"the message is over {max_bytes} bytes", meta={"max": max_bytes, "length": len(data)}
        )
    try:
        body = orjson.loads(data) if data else {}
    except orjson.JSONDecodeError as exc:
        if too_deep_to_parse(exc):
            raise depth_refused("the message", "") from None
        raise InputInvalidError(
            f"the message is not JSON ({exc.msg} at character {exc.pos}); send a JSON object",
            meta={"issues": [{"path": "", "message": "not JSON"}]},
        ) from None
    if not isinstance(body, dict):
        raise InputInvalidError(
            "the message must be a JSON object",
            meta={"issues": [{"path": "", "message": "object"}]},
        )
    unknown = sorted(set(body) - allowed)
    if unknown:
        raise InputInvalidError(
            f"unknown field(s) {', '.join(unknown)}; "
            f"this subject reads {', '.join(sorted(allowed))}",
            meta={"issues": [{"path": k, "message": "unknown field"} for k in unknown]},
        )
    return body


def error_body(exc: BaseException) -> dict[str, Any]:
    """The reply (or the ``rejected`` message) for a failure: codes as on HTTP, secrets masked."""
    if isinstance(
        exc, (asyncpg.UntranslatableCharacterError, asyncpg.CharacterNotInRepertoireError)
    ):
        exc = InputInvalidError(
            "the message carries a NUL character (\\u0000), which cannot be stored; remove it",
            meta={"issues": [{"path": "", "message": "NUL character"}]},
        )
    if not isinstance(exc, UltimateError):
        exc = UltimateError(f"unexpected {type(exc).__name__}; the api logged the detail")
    meta = exc.meta
    try:
        orjson.dumps(meta)
    except orjson.JSONEncodeError:
        # A meta echoing what was sent (a number past 64 bits) would leave the reply unsent:
        # the code and the message still say what was wrong, as on HTTP.
        meta = {}
    return {"error": {**exc.to_dict(), "meta": meta, "message": redact_text(exc.message)}}


def answer_bytes(answer: dict[str, Any]) -> bytes:
    """A reply or rejected message as JSON. An error whose ``meta`` holds what JSON cannot
    carry goes with an empty ``meta``: its code and message still reach the producer, and
    the message still ends (a serialising failure would leave it unanswered, or redelivered)."""
    try:
        return orjson.dumps(answer)
    except TypeError:
        error = answer.get("error")
        if not isinstance(error, dict):
            raise
        code, message = error.get("code"), error.get("message")
        bare: dict[str, Any] = {"code": code, "message": message, "meta": {}}
        return orjson.dumps({**answer, "error": bare})


@dataclass(frozen=True, slots=True)
class NatsEdge:
    """The operations both NATS forms run, over the api's driver, tokens and batcher."""

    registry: Registry
    driver: JobDriver
    tokens: TokenLookup
    batcher: EnqueueBatcher
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES
    buckets: TokenBuckets | None = None
    """The per-token rate limit of the request/reply form (None: no limit)."""
    known: KnownTokens | None = None
    """Tokens' fixed facts (the HTTP edge's instance in the api), kept when the batcher checks
    revocation inside the enqueue; None: every enqueue reads its token."""

    async def principal(
        self, authorization: str | None, scope: str, *, limited: bool = False
    ) -> Principal:
        principal = await self.authenticate(authorization, limited=limited)
        principal.require(scope)
        return principal

    async def authenticate(self, authorization: str | None, *, limited: bool = False) -> Principal:
        """The token behind ``authorization`` (401); with ``limited``, within its rate (429),
        checked in the HTTP edge's order: who, then how often, then what."""
        principal = await authenticate(self.tokens, authorization, self.driver.clock.now_ms())
        if limited and self.buckets is not None:
            self.buckets.take(principal.token_id)
        return principal

    async def stream_principal(self, authorization: str | None) -> tuple[Principal, str | None]:
        """A stream message's token, read as the single enqueue reads it
        (``enqueue_principal``): from ``known`` when seen live before, then with the token id
        its insert must check (``EnqueueBatcher.enqueue_group``); None when read just now."""
        return await enqueue_principal(self, authorization, limited=False)

    def forget(self, authorization: str | None) -> None:
        """A token an insert found dead: its next message reads the table (and says why)."""
        if self.known is not None:
            with contextlib.suppress(UnauthorizedError):
                self.known.forget(bearer_secret(authorization))

    def request(
        self,
        principal: Principal,
        job: str,
        data: bytes,
        *,
        job_id: str | None = None,
        debounce_seq: int | None = None,
    ) -> EnqueueRequest:
        """The validated request a stream message asks for, as ``principal`` (refusals raise);
        the consumer's batched path, ``enqueue``'s rules without its statement."""
        body = parse_object(data, STREAM_FIELDS, self.max_message_bytes)
        req, _ = single_request(
            self.registry,
            principal,
            job,
            body,
            self.driver.clock,
            job_id=job_id,
            debounce_seq=debounce_seq,
        )
        return req

    async def enqueue(
        self,
        job: str,
        data: bytes,
        authorization: str | None,
        *,
        job_id: str | None = None,
        debounce_seq: int | None = None,
        limited: bool = False,
    ) -> dict[str, Any]:
        """Queue one run of ``job``: the HTTP edge's ``enqueue_one``. The request form
        (``job_id`` None) reads ``onConflict`` as HTTP does; the stream form passes its
        derived ``job_id``, so a second delivery of one message meets the row the first one
        made, and takes no ``onConflict`` (that meeting is a dedupe it must not refuse); its
        ``debounce_seq`` (the message's stream sequence) keeps a second delivery from moving a
        run a newer message of its key moved."""
        fields = SINGLE_FIELDS if job_id is None else STREAM_FIELDS

        async def body() -> dict[str, Any]:
            return parse_object(data, fields, self.max_message_bytes)

        return await enqueue_one(
            self,
            self.registry,
            job,
            authorization,
            body,
            limited=limited,
            job_id=job_id,
            debounce_seq=debounce_seq,
        )

    async def publish(
        self, name: str, data: bytes, authorization: str | None, *, limited: bool = False
    ) -> dict[str, Any]:
        principal = await self.principal(authorization, "events:publish", limited=limited)
        body = parse_object(data, _EVENT_FIELDS, self.max_message_bytes)
        name = check_text("eventName", name)
        # A tenant token's event reaches only its tenant's waiters; an operator's, every waiter.
        record = await publish_event(name, body.get("payload"), tenant=principal.tenant_id)
        return {
            "id": record.id,
            "name": record.name,
            "publishedAtMs": record.published_at_ms,
            "expiresAtMs": record.expires_at_ms,
        }


__all__ = [
    "DEFAULT_MAX_MESSAGE_BYTES",
    "NatsEdge",
    "answer_bytes",
    "error_body",
    "parse_object",
]
