"""The context a job's code runs under: its declared tenant, its trace, the app's ``ctx``.

A job body has no request behind it, so ``execute_job`` installs the org the job DECLARED
(``tenant(input)``) as the acting actor's ``org_id`` — every tenant-scoped read inside the body
is checked against it, as on every other surface. ``tenant='none'`` installs an actor with no
org, so such a read is ``X_TENANCY_ACTOR_ORG_REQUIRED`` unless wrapped in ``cross_tenant()``.
The actor has no ``id``: a job runs with system authority and never impersonates whoever
enqueued it (``enqueued_by`` is attribution only). The ``on_settled`` hook runs under the same
scope.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

from ujobs.context import Actor, ActorTrace
from ujobs.drivers.base import ClaimedJob, JSONValue
from ujobs.errors import InputInvalidError, JobInputUnparseableError, error_code_of
from ujobs.jobs.job import JobHandle
from ujobs.tracing import JobSpan, child_traceparent, job_span, live_tracer

ContextSpec = Any
"""The app's ``ctx``: a value, or a zero-argument callable answering it (called per attempt,
inside the job's scope, so it can read the job's actor)."""


_NO_ORG_ACTOR = Actor(id=None, org_id=None, kind="system")


def job_actor(tenant: str | None) -> Actor:
    """The actor a job acts as: system authority, the declared org (None for 'none')."""
    if tenant is None:
        return _NO_ORG_ACTOR  # frozen: one instance serves every run of a tenant='none' job
    return Actor(id=None, org_id=tenant, kind="system")


def job_scope(tenant: str | None, traceparent: str | None) -> ActorTrace:
    """Install the job's actor and its trace for the block (and every task created in it);
    ``with job_scope(...) as actor``."""
    return ActorTrace(job_actor(tenant), traceparent)


class AttemptScope(ActorTrace):
    """``with job_span(...) as traceparent, job_scope(tenant, traceparent)`` as ONE block, the
    one ``execute_job`` enters per attempt: with no tracer recording there is no span object,
    only the child ``traceparent`` (``ujobs.tracing``), and the actor and trace are set as
    ``ActorTrace`` sets them. Leaving it resets the scope, then ends the span (if any) with the
    block's exception, as the two nested blocks did."""

    __slots__ = ("_claimed", "_span")

    def __init__(self, claimed: ClaimedJob, tenant: str | None) -> None:
        ActorTrace.__init__(self, job_actor(tenant), None)
        self._claimed = claimed
        self._span: JobSpan | None = None

    def __enter__(self) -> Actor | None:
        claimed = self._claimed
        parent = claimed.traceparent
        if live_tracer() is None:
            self._traceparent = None if parent is None else child_traceparent(parent)
        else:
            span = job_span(
                claimed.name,
                job_id=claimed.id,
                queue=claimed.queue,
                attempt=claimed.attempt,
                parent=parent,
            )
            self._traceparent = span.__enter__()
            self._span = span
        return ActorTrace.__enter__(self)

    def __exit__(self, *exc: Any) -> None:
        ActorTrace.__exit__(self, *exc)
        span = self._span
        if span is not None:
            self._span = None
            span.__exit__(*exc)


def build_ctx(context: ContextSpec) -> Any:
    """The app's ctx for one attempt: ``context()`` when callable, else the value itself."""
    if callable(context):
        return context()
    return context


class ParsedInput(NamedTuple):
    """The stored input under the job's current schema, and the tenant it declares.

    ``ok`` is False when the input no longer parses (``error`` is ``X_JOB_INPUT_UNPARSEABLE``);
    ``tenant`` then falls back to the row's stamped ``tenant_id`` so the failure's hook still
    runs under the org the row was queued for. ``error`` is also set when ``tenant(input)``
    itself fails (the attempt fails without the body running). A named tuple: one is built
    per attempt, and a frozen dataclass costs several times as much to build.
    """

    value: Any
    ok: bool
    tenant: str | None
    error: BaseException | None


def parse_stored(
    handle: JobHandle[Any], raw: JSONValue, *, stored_tenant: str | None
) -> ParsedInput:
    """Parse a row's input and derive its tenant; never raises (the attempt fails instead)."""
    try:
        value = handle.parse_input(raw)
    except Exception as exc:
        meta: dict[str, Any] = {"job": handle.name, "cause": error_code_of(exc)}
        if isinstance(exc, InputInvalidError):
            meta["issues"] = exc.meta.get("issues", [])
        err = JobInputUnparseableError(
            f"job {handle.name!r}: the stored input no longer parses under the job's schema "
            f"({exc}); a deploy may have changed the schema — fix the schema or requeue with a "
            "new input",
            meta=meta,
        )
        err.__cause__ = exc
        return ParsedInput(None, False, stored_tenant, err)
    try:
        tenant = handle.tenant_for(value)
    except Exception as exc:
        return ParsedInput(value, True, stored_tenant, exc)
    return ParsedInput(value, True, tenant, None)


def lookup_handle(
    jobs: Callable[[str], JobHandle[Any] | None] | Any, name: str
) -> JobHandle[Any] | None:
    """A handle by name from a registry (``.job(name)``), a mapping, or a function."""
    finder = getattr(jobs, "job", None)
    if callable(finder):
        found = finder(name)
    elif hasattr(jobs, "get"):
        found = jobs.get(name)
    elif callable(jobs):
        found = jobs(name)
    else:
        found = None
    return found if isinstance(found, JobHandle) else None
