"""A job's declaration checked where it is written: ``build_definition`` answers the frozen
``JobDefinition`` a handle wraps, or refuses it.

Everything a declaration can get wrong is refused here, at import, with
``X_JOB_DECLARATION_INVALID`` — a ``concurrency: 0`` or a ``step_timeout`` of zero would
otherwise mean "no limit", the opposite of what the author wrote, and surface only in
production. ``idempotency_key`` and ``tenant`` are required: passing ``None`` is
``X_IDEMPOTENCY_REQUIRED`` / ``X_JOB_TENANT_REQUIRED``.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.drivers.records import DEFAULT_PRIORITY, MAX_QUEUE_CONTROL_MS, check_priority
from ujobs.durations import Duration
from ujobs.errors import IdempotencyRequiredError, JobTenantRequiredError, UltimateError
from ujobs.execution.run import OnSettled, Run
from ujobs.jobs.declaration_rules import (
    DEFAULT_EVENT_POLL_MS,
    Concurrency,
    KeyedConcurrency,
    declaration_invalid,
    positive_duration,
    validate_concurrency,
    validate_name,
)
from ujobs.jobs.retry import Retry, coerce_retry
from ujobs.jobs.schema import InputSchema, as_input_schema

__all__ = ["JobDefinition", "KeySpec", "RunFn", "TenantSpec", "build_definition"]

RunFn = Callable[[Run[Any]], Awaitable[Any]]
TenantSpec = Callable[[Any], str | None] | Literal["none"]
KeySpec = Callable[[Any], str] | str


@dataclass(frozen=True, slots=True)
class JobDefinition:
    name: str
    explicit_name: bool
    input: InputSchema[Any]
    idempotency_key: KeySpec
    tenant: TenantSpec
    retry: Retry
    queue: str
    timeout_ms: int | None
    step_timeout_ms: int | None
    event_poll_ms: int
    concurrency: int | KeyedConcurrency | None
    on_settled: OnSettled | None
    run: RunFn
    description: str | None
    module: str | None
    debounce_ms: int | None = None
    unique_for_ms: int | None = None
    output: InputSchema[Any] | None = None
    """The declared type of the body's return value (``output=``): the result is stored in
    its JSON form and the OpenAPI document names it; None: any JSON."""
    priority: int = DEFAULT_PRIORITY
    """Each enqueue's priority unless it names its own: 0 (first, the default) to 9."""


def build_definition(
    fn: RunFn,
    *,
    name: str | None,
    input: Any,
    idempotency_key: KeySpec | None,
    tenant: TenantSpec | None,
    retry: Retry | Mapping[str, Any] | None,
    queue: str,
    timeout: Duration | None,
    step_timeout: Duration | None,
    event_poll: Duration | None,
    concurrency: Concurrency | None,
    on_settled: OnSettled | None,
    description: str | None,
    debounce: Duration | None = None,
    unique_for: Duration | None = None,
    output: Any = None,
    priority: int = DEFAULT_PRIORITY,
) -> JobDefinition:
    explicit = name is not None
    job_name = validate_name(name if name is not None else getattr(fn, "__name__", None))
    if not callable(fn):
        raise declaration_invalid(job_name, "the body must be an async function of the run")
    if idempotency_key is None:
        raise IdempotencyRequiredError(
            f"job {job_name!r}: idempotency_key is required — every job is asked 'have you "
            "already run?'; answer it from the input (e.g. lambda i: f'onboard:{i.org_id}')",
            meta={"job": job_name},
        )
    if not callable(idempotency_key) and not (isinstance(idempotency_key, str) and idempotency_key):
        raise declaration_invalid(
            job_name, "idempotency_key must be a function of the input or a string"
        )
    if tenant is None:
        raise JobTenantRequiredError(
            f"job {job_name!r}: tenant is required — a function of the input naming the org the "
            "run acts under, or tenant='none' for work that belongs to no tenant",
            meta={"job": job_name},
        )
    if tenant != "none" and not callable(tenant):
        raise declaration_invalid(
            job_name, "tenant must be a function of the input or the string 'none'", field="tenant"
        )
    try:
        schema = as_input_schema(input)
        output_schema = None if output is None else as_input_schema(output)
        policy = coerce_retry(retry)
    except UltimateError as exc:
        raise declaration_invalid(job_name, exc.message) from None
    validate_name(queue, kind="queue")
    try:
        check_priority(priority)
    except UltimateError as exc:
        raise declaration_invalid(job_name, exc.message, field="priority") from None
    if on_settled is not None and not callable(on_settled):
        raise declaration_invalid(
            job_name, "on_settled must be an async function of the settlement"
        )
    definition = JobDefinition(
        name=job_name,
        explicit_name=explicit,
        input=schema,
        idempotency_key=idempotency_key,
        tenant=tenant,
        retry=policy,
        queue=queue,
        timeout_ms=positive_duration(job_name, "timeout", timeout),
        step_timeout_ms=positive_duration(job_name, "step_timeout", step_timeout),
        event_poll_ms=positive_duration(job_name, "event_poll", event_poll)
        or DEFAULT_EVENT_POLL_MS,
        concurrency=validate_concurrency(job_name, concurrency),
        on_settled=on_settled,
        run=fn,
        description=description if description is not None else inspect.getdoc(fn),
        module=getattr(fn, "__module__", None),
        debounce_ms=queue_control(job_name, "debounce", debounce),
        unique_for_ms=queue_control(job_name, "unique_for", unique_for),
        output=output_schema,
        priority=priority,
    )
    return definition


def queue_control(name: str, field: str, value: Duration | None) -> int | None:
    """``debounce`` / ``unique_for`` in ms: above zero and at most a year."""
    ms = positive_duration(name, field, value)
    if ms is not None and ms > MAX_QUEUE_CONTROL_MS:
        raise declaration_invalid(name, f"{field} is at most a year", field=field)
    return ms
