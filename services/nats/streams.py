"""The edge's JetStream streams and the api's durable consumer, created or brought up to date
at start by the api (their owner), with these limits:

| Stream | Subjects | Retention | Max age | Max bytes | Duplicate window | When full |
|---|---|---|---|---|---|---|
| ``UJOBS_ENQUEUE`` | ``ujobs.js.enqueue.>``, ``ujobs.js.events.>`` | work queue (a message leaves once acked or terminated) | 7 days | 1 GiB | 2 minutes | refuse new (the producer's publish fails; nothing acked is dropped) |
| ``UJOBS_SETTLED`` | ``ujobs.settled.>`` | limits | 7 days | 1 GiB | 10 minutes | drop the oldest |

The consumer ``ujobs-api`` on ``UJOBS_ENQUEUE``: durable, pull, explicit acks, ``ack_wait``
30 s (``UJOBS_NATS_ACK_WAIT_MS``: a message a crashed api held comes back after it), redelivered until acked or terminated,
at most 2,048 unacked (``UJOBS_NATS_MAX_ACK_PENDING``). The server's ``max_deliver`` is
unlimited: the api bounds deliveries itself (``ujobs.services.nats.consumer``: a message still
failing with an unexpected error on its ``UJOBS_NATS_MAX_DELIVERIES``th delivery is
terminated to the rejected subject), because a server-side bound would also stop the
deliveries a database outage needs, and would leave the message in the work queue, unseen,
with nothing said to the producer.

``ensure_streams`` reads each stream's config and updates it when a limit or the subjects
differ (an operator's change to a limit is put back at the next start: the table above is the
contract). ``stream_status`` answers what ``ujobs nats status`` prints, ``subjects_note`` among
it: the enqueue stream's subjects are not DESIGN.md's ``ujobs.enqueue.>`` (see
``ujobs.services.nats.names`` for why no stream option reconciles the two).
"""  # noqa: E501

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nats.js import JetStreamContext
from nats.js.api import (
    AckPolicy,
    ConsumerConfig,
    DeliverPolicy,
    DiscardPolicy,
    RetentionPolicy,
    StorageType,
    StreamConfig,
)
from nats.js.errors import NotFoundError

from ujobs.services.config.variables import DEFAULT_NATS_MAX_ACK_PENDING
from ujobs.services.nats.names import NatsNames

DAY_S = 86_400.0
GIB = 1 << 30


@dataclass(frozen=True, slots=True)
class StreamLimits:
    max_age_s: float = 7 * DAY_S
    max_bytes: int = GIB
    duplicate_window_s: float = 120.0


ENQUEUE_LIMITS = StreamLimits(duplicate_window_s=120.0)
SETTLED_LIMITS = StreamLimits(duplicate_window_s=600.0)
ACK_WAIT_S = 30.0
MAX_ACK_PENDING = DEFAULT_NATS_MAX_ACK_PENDING


def enqueue_stream_config(names: NatsNames, limits: StreamLimits = ENQUEUE_LIMITS) -> StreamConfig:
    return StreamConfig(
        name=names.enqueue_stream,
        subjects=[names.js_enqueue_wildcard, names.js_events_wildcard],
        retention=RetentionPolicy.WORK_QUEUE,
        discard=DiscardPolicy.NEW,
        storage=StorageType.FILE,
        max_age=limits.max_age_s,
        max_bytes=limits.max_bytes,
        duplicate_window=limits.duplicate_window_s,
    )


def settled_stream_config(names: NatsNames, limits: StreamLimits = SETTLED_LIMITS) -> StreamConfig:
    return StreamConfig(
        name=names.settled_stream,
        subjects=[names.settled_wildcard],
        retention=RetentionPolicy.LIMITS,
        discard=DiscardPolicy.OLD,
        storage=StorageType.FILE,
        max_age=limits.max_age_s,
        max_bytes=limits.max_bytes,
        duplicate_window=limits.duplicate_window_s,
    )


def consumer_config(
    names: NatsNames, *, ack_wait_s: float = ACK_WAIT_S, max_ack_pending: int = MAX_ACK_PENDING
) -> ConsumerConfig:
    return ConsumerConfig(
        durable_name=names.durable,
        ack_policy=AckPolicy.EXPLICIT,
        deliver_policy=DeliverPolicy.ALL,
        ack_wait=ack_wait_s,
        max_deliver=-1,
        max_ack_pending=max_ack_pending,
    )


_COMPARED = ("subjects", "retention", "discard", "max_age", "max_bytes", "duplicate_window")


async def ensure_stream(js: JetStreamContext, wanted: StreamConfig) -> str:
    """Create ``wanted``, or update the stream to it: answers ``created``, ``updated`` or
    ``unchanged``."""
    assert wanted.name is not None
    try:
        info = await js.stream_info(wanted.name)
    except NotFoundError:
        await js.add_stream(wanted)
        return "created"
    current = info.config
    if all(_same(getattr(current, k), getattr(wanted, k)) for k in _COMPARED):
        return "unchanged"
    await js.update_stream(wanted)
    return "updated"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return a is not None and b is not None and abs(float(a) - float(b)) < 1e-3
    if isinstance(a, list) and isinstance(b, list):
        return sorted(a) == sorted(b)
    return bool(a == b)


async def ensure_streams(
    js: JetStreamContext,
    names: NatsNames,
    *,
    ack_wait_s: float = ACK_WAIT_S,
    max_ack_pending: int = MAX_ACK_PENDING,
) -> dict[str, str]:
    """Both streams and the api's consumer (``ack_wait_s``: ``UJOBS_NATS_ACK_WAIT_MS``,
    ``max_ack_pending``: ``UJOBS_NATS_MAX_ACK_PENDING``; an existing consumer is updated to
    them); answers what happened to each stream."""
    done = {
        names.enqueue_stream: await ensure_stream(js, enqueue_stream_config(names)),
        names.settled_stream: await ensure_stream(js, settled_stream_config(names)),
    }
    wanted = consumer_config(names, ack_wait_s=ack_wait_s, max_ack_pending=max_ack_pending)
    await js.add_consumer(names.enqueue_stream, wanted)
    return done


def _text(value: Any) -> str | None:
    """An enum field as its wire text (nats-py hands back a str or the enum)."""
    if value is None:
        return None
    return str(getattr(value, "value", value))


async def stream_status(js: JetStreamContext, names: NatsNames) -> dict[str, Any]:
    """Each stream's limits and state, and the consumer's backlog (None where missing)."""
    streams: dict[str, Any] = {}
    for name in (names.enqueue_stream, names.settled_stream):
        try:
            info = await js.stream_info(name)
        except NotFoundError:
            streams[name] = None
            continue
        c, s = info.config, info.state
        streams[name] = {
            "subjects": list(c.subjects or []),
            "retention": _text(c.retention),
            "maxAgeS": c.max_age,
            "maxBytes": c.max_bytes,
            "duplicateWindowS": c.duplicate_window,
            "discard": _text(c.discard),
            "messages": s.messages,
            "bytes": s.bytes,
            "firstSeq": s.first_seq,
            "lastSeq": s.last_seq,
        }
    consumer: dict[str, Any] | None
    try:
        ci = await js.consumer_info(names.enqueue_stream, names.durable)
        consumer = {
            "name": names.durable,
            "stream": names.enqueue_stream,
            "pending": ci.num_pending,
            "ackPending": ci.num_ack_pending,
            "redelivered": ci.num_redelivered,
            "ackWaitS": ci.config.ack_wait,
            "maxAckPending": ci.config.max_ack_pending,
        }
    except NotFoundError:
        consumer = None
    return {
        "prefix": names.prefix,
        "requestSubjects": [names.enqueue_wildcard, names.events_wildcard],
        "streams": streams,
        "consumer": consumer,
        "subjectsNote": subjects_note(names),
    }


def subjects_note(names: NatsNames) -> str:
    """Where the stream form's subjects depart from DESIGN.md § Streams, and why."""
    return (
        f"{names.enqueue_stream} takes {names.js_enqueue_wildcard} and "
        f"{names.js_events_wildcard}, not {names.enqueue_wildcard} and "
        f"{names.events_wildcard} as DESIGN.md says: those are the request/reply subjects, "
        "and JetStream answers a request on a subject a stream captures with its publish ack "
        "(and stores it, so the consumer would enqueue it again)"
    )


__all__ = [
    "ACK_WAIT_S",
    "ENQUEUE_LIMITS",
    "MAX_ACK_PENDING",
    "SETTLED_LIMITS",
    "StreamLimits",
    "consumer_config",
    "enqueue_stream_config",
    "ensure_streams",
    "settled_stream_config",
    "stream_status",
    "subjects_note",
]
