"""What a job handle puts in an ``EnqueueRequest`` besides the input: the fields a call's
options, its actor and its trace decide, checked once per call (``shared_fields``), and the
request built from them (``request_of``).

A batch enqueue (``JobHandle.enqueue_many``) builds hundreds of requests per call, each the
request ``JobHandle.request`` would build for its input alone: what they share is read once
per batch, and each request is built positionally (binding fourteen keywords cost more than
the rest of the constructor). ``REQUEST_FIELDS`` pins that order, checked at import.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

from ujobs.clock import Clock
from ujobs.context import current_actor, current_traceparent
from ujobs.drivers.base import MAX_QUEUE_CONTROL_MS, EnqueueRequest, check_priority
from ujobs.durations import Duration, duration_ms
from ujobs.errors import InvariantError
from ujobs.jobs.declaration_rules import validate_name
from ujobs.jobs.definition import JobDefinition
from ujobs.limits import check_text

REQUEST_FIELDS = (
    "name",
    "input",
    "idempotency_key",
    "queue",
    "tenant_id",
    "max_attempts",
    "run_at_ms",
    "id",
    "run_id",
    "traceparent",
    "enqueued_by",
    "debounce_ms",
    "unique_for_ms",
    "priority",
    "slot_key",
    "debounce_seq",
)
"""The order ``request_of`` passes an ``EnqueueRequest``'s fields in (all but the last: a
handle never sets ``debounce_seq``, only an edge that knows its producer's order does)."""
if tuple(f.name for f in dataclasses.fields(EnqueueRequest)) != REQUEST_FIELDS:
    raise TypeError(f"EnqueueRequest's fields are not {REQUEST_FIELDS} in that order")


class SharedFields(NamedTuple):
    """What every request of one call shares (a tuple: a single enqueue builds one too, and
    a frozen dataclass costs twice as much to build)."""

    queue: str
    max_attempts: int
    run_at_ms: int | None
    delay_ms: int | None
    """Each request is due this long after its own read of ``clock``."""
    clock: Clock
    traceparent: str | None
    enqueued_by: str | None
    debounce_ms: int | None
    unique_for_ms: int | None
    priority: int


def shared_fields(
    d: JobDefinition,
    delay: Duration | None,
    run_at_ms: int | None,
    queue: str | None,
    run_id: str | None,
    enqueued_by: str | None,
    clock: Clock,
    debounce: Duration | None,
    priority: int | None,
) -> SharedFields:
    """The fields of job ``d``'s requests that the call decides, checked (the call's options
    refused as ``JobHandle.request`` refuses them), the actor and the trace read."""
    if delay is not None and run_at_ms is not None:
        raise InvariantError("pass delay or run_at_ms, not both")
    delay_ms = duration_ms(delay, field="delay") if delay is not None else None
    if queue is not None:
        validate_name(queue, kind="queue")
    if run_id is not None:
        check_text("runId", run_id)
    debounce_ms = d.debounce_ms
    if debounce is not None:
        debounce_ms = duration_ms(debounce, field="debounce")
        if not 0 < debounce_ms <= MAX_QUEUE_CONTROL_MS:
            raise InvariantError(
                "debounce must be above zero and at most a year",
                meta={"debounce_ms": debounce_ms},
            )
    if priority is not None:
        check_priority(priority)
    if enqueued_by is None:
        actor = current_actor()
        enqueued_by = actor.id if actor else None
    return SharedFields(
        queue or d.queue,
        d.retry.attempts,
        run_at_ms,
        delay_ms,
        clock,
        current_traceparent(),
        enqueued_by,
        debounce_ms,
        d.unique_for_ms,
        d.priority if priority is None else priority,
    )


def request_of(
    name: str,
    dumped: Any,
    key: str,
    tenant: str | None,
    slot_key: str | None,
    shared: SharedFields,
    job_id: str | None,
    run_id: str | None,
) -> EnqueueRequest:
    """The request of job ``name`` for one input (``dumped``, its key, its tenant and its fleet
    slot's lease key)."""
    (
        queue,
        max_attempts,
        run_at_ms,
        delay_ms,
        clock,
        traceparent,
        enqueued_by,
        debounce_ms,
        unique_for_ms,
        priority,
    ) = shared
    if delay_ms is not None:
        run_at_ms = clock.now_ms() + delay_ms  # each request's own clock read
    return EnqueueRequest(
        name,
        dumped,
        key,
        queue,
        tenant,
        max_attempts,
        run_at_ms,
        job_id,
        run_id,
        traceparent,
        enqueued_by,
        debounce_ms,
        unique_for_ms,
        priority,
        slot_key,
    )


__all__ = ["REQUEST_FIELDS", "SharedFields", "request_of", "shared_fields"]
