"""What crosses the wire to the Redis driver's scripts, both ways.

Scripts take flat string arguments and answer nested lists of bulk strings and integers. This
module is the one place that knows the argument order of each script and the field order of
each reply (the Lua files' headers state the same), so ``driver`` reads as the contract.
Replies may arrive as ``bytes`` or ``str``: a caller may hand in a client built with
``decode_responses=True``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, cast

import orjson

from ujobs.drivers.base import (
    ALL_STATES,
    COUNTER_TIERS,
    LEASE_LAPSED_FINAL_ATTEMPT,
    ClaimedJob,
    CounterBucket,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    JobRow,
    JobState,
    QueueStats,
    StepRecord,
)

JSONValue = Any
ENQUEUE_STRIDE = 16
"""Arguments per job in ``enqueue.lua``."""


def text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def opt_text(value: bytes | str | None) -> str | None:
    return None if value is None else text(value)


def opt_arg(value: str | int | None) -> str:
    """An optional argument: ``""`` absent, ``"=<value>"`` present (so ``""`` survives)."""
    return "" if value is None else f"={value}"


def live_key(name: str, tenant_id: str | None, idempotency_key: str) -> str:
    """The one-live-run key ``(name, tenant or '', key)``, unambiguous whatever the strings hold."""
    return orjson.dumps([name, tenant_id or "", idempotency_key]).decode()


def dump_json(value: JSONValue) -> bytes:
    """JSON for storage; what cannot be stored as JSON fails here, before the script runs."""
    return orjson.dumps(value)


def enqueue_args(
    now: int,
    requests: Sequence[tuple[EnqueueRequest, str, str]],
    wake: tuple[str, int, int] | None = None,
) -> list[Any]:
    """``enqueue.lua``'s arguments for ``(request, id, run_id)`` triples; ``wake`` is
    ``(channel, slot_ms, due_within_ms)`` when the script announces, None when it does not."""
    channel, slot_ms, horizon = wake if wake is not None else ("", 1, 0)
    args: list[Any] = [now, channel, slot_ms, horizon]
    for request, job_id, run_id in requests:
        run_at = request.run_at_ms
        if request.debounce_ms is not None:
            run_at = max(now if run_at is None else run_at, now + request.debounce_ms)
        args += [
            job_id,
            run_id,
            request.name,
            request.queue,
            opt_arg(request.tenant_id),
            request.idempotency_key,
            live_key(request.name, request.tenant_id, request.idempotency_key),
            request.max_attempts,
            opt_arg(run_at),
            dump_json(request.input),
            opt_arg(request.traceparent),
            opt_arg(request.enqueued_by),
            opt_arg(request.debounce_ms),
            opt_arg(request.unique_for_ms),
            request.priority,
            opt_arg(request.stored_debounce_seq),
        ]
    return args


def enqueued_from(reply: Sequence[Any]) -> list[Enqueued]:
    return [
        Enqueued(text(reply[i]), text(reply[i + 1]), bool(reply[i + 2]), bool(reply[i + 3]))
        for i in range(0, len(reply), 4)
    ]


def claimed_from(row: Sequence[Any], store_epoch: str | None = None) -> ClaimedJob:
    """One row of ``claim.lua``'s ``claimed`` list, claimed under the mark ``store_epoch``."""
    return ClaimedJob(
        id=text(row[0]),
        run_id=text(row[1]),
        name=text(row[2]),
        queue=text(row[3]),
        input=orjson.loads(row[4]),
        tenant_id=opt_text(row[5]),
        idempotency_key=text(row[6]),
        attempt=int(row[7]),
        max_attempts=int(row[8]),
        worker_id=text(row[9]),
        claim=int(row[10]),
        run_at_ms=int(row[11]),
        created_at_ms=int(row[12]),
        lease_expires_at_ms=int(row[13]),
        traceparent=opt_text(row[14]),
        enqueued_by=opt_text(row[15]),
        store_epoch=store_epoch,
        ahead=int(row[16]) == 1,
        snoozes=int(row[17]),
        priority=int(row[18]),
        slot=None,  # fleet slots are the worker's to take (ClaimOptions.slots)
    )


def job_row_from(reply: Sequence[Any]) -> JobRow | None:
    """A job's hash (``result_watch.lua``'s HGETALL) as the operator surface's row; None
    when there is no such row."""
    if not reply:
        return None
    f = {text(reply[i]): reply[i + 1] for i in range(0, len(reply), 2)}

    def num(name: str) -> int | None:
        value = f.get(name)
        return None if value is None else int(value)

    state = text(f["state"])
    return JobRow(
        id=text(f["id"]),
        run_id=text(f["run_id"]),
        name=text(f["name"]),
        queue=text(f["queue"]),
        state=cast(JobState, state),
        input=orjson.loads(f["input"]),
        tenant_id=opt_text(f.get("tenant_id")),
        idempotency_key=text(f["key"]),
        attempt=int(f["attempt"]),
        max_attempts=int(f["max_attempts"]),
        run_at_ms=int(f["run_at"]),
        created_at_ms=int(f["created_at"]),
        updated_at_ms=int(f["updated_at"]),
        finished_at_ms=num("finished_at"),
        claimed_by=opt_text(f.get("claimed_by")),
        claim=num("claim") or 0,
        lease_expires_at_ms=num("lease"),
        last_error=opt_text(f.get("last_error")),
        progress=None,  # progress is written through the operator surface, which Redis lacks
        traceparent=opt_text(f.get("traceparent")),
        enqueued_by=opt_text(f.get("enqueued_by")),
        result=None if f.get("result") is None else orjson.loads(f["result"]),
        parent_id=None,  # the Redis driver keeps no children (X_DRIVER_UNSUPPORTED)
        priority=num("priority") or 0,
    )


def exhausted_from(row: Sequence[Any]) -> ExhaustedJob:
    """One row of ``claim.lua``'s ``buried`` list."""
    state = text(row[8])
    if state not in ("dead", "failed"):
        raise ValueError(f"claim.lua buried a row as {state!r}")
    return ExhaustedJob(
        id=text(row[0]),
        run_id=text(row[1]),
        name=text(row[2]),
        queue=text(row[3]),
        input=orjson.loads(row[4]),
        tenant_id=opt_text(row[5]),
        attempt=int(row[6]),
        max_attempts=int(row[7]),
        state=cast(Literal["dead", "failed"], state),
        last_error=LEASE_LAPSED_FINAL_ATTEMPT,  # what claim.lua wrote on the buried row
    )


def steps_from(reply: Sequence[Any]) -> list[StepRecord]:
    """``load_steps.lua``'s name/value pairs, in the order they were saved.

    A run's steps are sequential (each is stored before the next starts), so save order is
    start order, whichever worker's clock stamped ``started_at``.
    """
    steps: list[StepRecord] = []
    for i in range(0, len(reply), 2):
        value = reply[i + 1]
        raw = value if isinstance(value, bytes) else value.encode()
        seq, started, finished, output = raw.split(b":", 3)
        steps.append(
            StepRecord(
                name=text(reply[i]),
                output=orjson.loads(output),
                seq=int(seq),
                started_at_ms=int(started),
                finished_at_ms=int(finished),
            )
        )
    steps.sort(key=lambda s: s.seq)
    return steps


def queue_stats_from(entry: Sequence[Any]) -> QueueStats:
    """One queue of ``stats.lua``: queue, due, oldest due, done, then state/count pairs."""
    counts: dict[str, int] = dict.fromkeys(ALL_STATES, 0)
    for i in range(4, len(entry), 2):
        state = text(entry[i])
        if state in counts:
            counts[state] = int(entry[i + 1])
    return QueueStats(
        queue=text(entry[0]),
        ready=counts["ready"],
        delayed=counts["delayed"],
        running=counts["running"],
        suspended=counts["suspended"],
        done=int(entry[3]),
        failed=counts["failed"],
        dead=counts["dead"],
        cancelled=counts["cancelled"],
        due=int(entry[1]),
        oldest_due_run_at_ms=None if entry[2] is None else int(entry[2]),
    )


def buckets_from(job: str, reply: Sequence[Any]) -> list[CounterBucket]:
    """``counters.lua``'s buckets: start, then field/value pairs."""
    width = COUNTER_TIERS[0][0]
    buckets: list[CounterBucket] = []
    for entry in reply:
        fields = {text(entry[i]): int(entry[i + 1]) for i in range(1, len(entry), 2)}
        buckets.append(
            CounterBucket(
                job=job,
                bucket_start_ms=int(entry[0]),
                width_ms=width,
                done=fields.get("done", 0),
                retried=fields.get("retried", 0),
                failed=fields.get("failed", 0),
                dead=fields.get("dead", 0),
                duration_ms=fields.get("duration_ms", 0),
            )
        )
    return buckets
