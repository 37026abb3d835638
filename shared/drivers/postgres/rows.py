"""Records from the Postgres statements, turned into the contract's dataclasses.

JSON crosses the wire as TEXT in both directions (``$n::text::jsonb`` in, ``col::text`` out),
encoded and decoded here with orjson. That is deliberate: the driver is handed a pool it did
not build, and text works the same whether or not that pool registered a json/jsonb codec.
What comes back is plain JSON (dict, list, str, int, float, bool, None), equal to what the
memory driver stores.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any, Literal, cast

import orjson

from ujobs.drivers.base import (
    ALL_STATES,
    LEASE_LAPSED_FINAL_ATTEMPT,
    BackfillRow,
    BackfillStatus,
    ClaimedJob,
    ExhaustedJob,
    JobRow,
    JobState,
    StepRecord,
    WorkerRow,
)
from ujobs.errors import JobRowStatusUnknownError, StepOutputInvalidError, UltimateError

JSONValue = Any
Record = Mapping[str, Any]


def dumps(value: JSONValue, *, error: type[UltimateError] = StepOutputInvalidError) -> str:
    """A value as JSON text for a ``$n::text::jsonb`` parameter; one JSON cannot carry is
    ``error`` (a step output's code by default, an enqueue passes the input's)."""
    try:
        return orjson.dumps(value).decode()
    except TypeError as exc:
        raise error(
            f"value cannot be stored as JSON: {exc}; use plain dicts, lists, str, numbers, "
            "booleans and None",
            meta={"type": type(value).__name__},
        ) from exc


def dumps_or_none(value: JSONValue) -> str | None:
    return None if value is None else dumps(value)


def loads(text: str | None) -> JSONValue:
    return None if text is None else orjson.loads(text)


def job_state(row_id: str, state: str) -> JobState:
    """A row's state, or ``X_JOB_ROW_STATUS_UNKNOWN`` for one this version does not know (a
    newer release's migration widened the states and wrote one): reported, never passed on as
    if it were a state every reader can handle."""
    for known in ALL_STATES:
        if state == known:
            return known
    raise JobRowStatusUnknownError(
        f"job {row_id} is in state {state!r}, which this version of ujobs does not know; a "
        "newer release wrote it: run that release (or move the row back with it)",
        meta={"id": row_id, "state": state, "known": list(ALL_STATES)},
    )


def job_row(r: Record) -> JobRow:
    return JobRow(
        id=r["id"],
        run_id=r["run_id"],
        name=r["name"],
        queue=r["queue"],
        state=job_state(r["id"], r["state"]),
        input=loads(r["input"]),
        tenant_id=r["tenant_id"],
        idempotency_key=r["idempotency_key"],
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        run_at_ms=r["run_at_ms"],
        created_at_ms=r["created_at_ms"],
        updated_at_ms=r["updated_at_ms"],
        finished_at_ms=r["finished_at_ms"],
        claimed_by=r["claimed_by"],
        claim=r["claim"],
        lease_expires_at_ms=r["lease_expires_at_ms"],
        last_error=r["last_error"],
        progress=loads(r["progress"]),
        traceparent=r["traceparent"],
        enqueued_by=r["enqueued_by"],
        result=loads(r.get("result")),
        parent_id=r.get("parent_id"),
        priority=r["priority"],
    )


CLAIMED_FIELDS = (
    "id",
    "run_id",
    "name",
    "queue",
    "input",
    "tenant_id",
    "idempotency_key",
    "attempt",
    "max_attempts",
    "worker_id",
    "claim",
    "run_at_ms",
    "created_at_ms",
    "lease_expires_at_ms",
    "traceparent",
    "enqueued_by",
    "store_epoch",
    "ahead",
    "snoozes",
    "priority",
    "slot",
)
"""The order ``claimed_job`` passes a ``ClaimedJob``'s fields in: one per claimed row, built
positionally (binding twenty-one keywords cost as much again as the constructor itself);
checked at import."""
if tuple(f.name for f in dataclasses.fields(ClaimedJob)) != CLAIMED_FIELDS:
    raise TypeError(f"ClaimedJob's fields are not {CLAIMED_FIELDS} in that order")


def claimed_job(r: Record) -> ClaimedJob:
    return ClaimedJob(  # positional, in CLAIMED_FIELDS' order
        r["id"],
        r["run_id"],
        r["name"],
        r["queue"],
        loads(r["input"]),
        r["tenant_id"],
        r["idempotency_key"],
        r["attempt"],
        r["max_attempts"],
        r["claimed_by"],  # worker_id
        r["claim"],
        r["run_at_ms"],
        r["created_at_ms"],
        r["lease_expires_at_ms"],
        r["traceparent"],
        r["enqueued_by"],
        None,  # store_epoch: a Postgres restart keeps what was committed, nothing to watch
        r["ahead"],
        r["snoozes"],
        r["priority"],
        r.get("slot"),  # claim_slots.sql's column; claim.sql has none
    )


def exhausted_job(r: Record) -> ExhaustedJob:
    return ExhaustedJob(
        id=r["id"],
        run_id=r["run_id"],
        name=r["name"],
        queue=r["queue"],
        input=loads(r["input"]),
        tenant_id=r["tenant_id"],
        attempt=r["attempt"],
        max_attempts=r["max_attempts"],
        state=cast(Literal["dead", "failed"], r["state"]),
        last_error=LEASE_LAPSED_FINAL_ATTEMPT,  # what claim.sql wrote on the buried row
    )


def step_record(r: Record) -> StepRecord:
    return StepRecord(
        name=r["name"],
        output=loads(r["output"]),
        seq=r["seq"],
        started_at_ms=r["started_at_ms"],
        finished_at_ms=r["finished_at_ms"],
    )


def worker_row(r: Record) -> WorkerRow:
    return WorkerRow(
        id=r["id"],
        host=r["host"],
        pid=r["pid"],
        started_at_ms=r["started_at_ms"],
        queues=tuple(r["queues"]),
        slots=r["slots"],
        in_flight=tuple(r["in_flight"]),
        last_heartbeat_ms=r["last_heartbeat_ms"],
        expires_at_ms=r["expires_at_ms"],
        draining_at_ms=r["draining_at_ms"],
    )


def backfill_row(r: Record) -> BackfillRow:
    return BackfillRow(
        name=r["name"],
        run_id=r["run_id"],
        checksum=r["checksum"],
        status=cast(BackfillStatus, r["status"]),
        app_version=r["app_version"],
        rows_processed=r["rows_processed"],
        last_cursor=loads(r["last_cursor"]),
        started_at_ms=r["started_at_ms"],
        completed_at_ms=r["completed_at_ms"],
        error=r["error"],
        tenant=r["tenant_id"],
    )
