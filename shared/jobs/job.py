"""``job()``: declare a job (as a decorator or a factory) and answer its handle.

The declaration is checked where it is written (``ujobs.jobs.definition``).
``idempotency_key`` and ``tenant`` are required keyword-only arguments: omitting one is a
``TypeError`` (and a type-checker error); passing ``None`` is the runtime code.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable, Coroutine, Iterable, Mapping
from typing import Any, Generic, Literal, TypeVar, cast, overload

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.context import Actor, acting_as
from ujobs.drivers.base import (
    DEFAULT_PRIORITY,
    DEFAULT_QUEUE,
    Enqueued,
    EnqueueRequest,
)
from ujobs.drivers.request_rows import Checked, RequestRows
from ujobs.durations import Duration
from ujobs.errors import (
    IdempotencyRequiredError,
    InvariantError,
    JobConcurrencyKeyInvalidError,
    JobDeclarationInvalidError,
    JobDuplicateError,
    JobTenantMismatchError,
    JobTenantRequiredError,
)
from ujobs.execution.run import OnSettled, Run
from ujobs.jobs.declaration_rules import (
    DEFAULT_EVENT_POLL_MS,
    MAX_CONCURRENCY_KEY_LENGTH,
    MAX_IDEMPOTENCY_KEY_LENGTH,
    NAME_PATTERN,
    Concurrency,
    KeyedConcurrency,
    WhenBusy,
    claim_declared_name,
    declaration_invalid,
    job_cap_key,
    job_lease_key,
    reset_declared_names,
    validate_concurrency,
    validate_name,
)
from ujobs.jobs.definition import (
    JobDefinition,
    KeySpec,
    RunFn,
    TenantSpec,
    build_definition,
)
from ujobs.jobs.enqueue_target import jobs_facade
from ujobs.jobs.request_fields import SharedFields, request_of, shared_fields
from ujobs.jobs.result_read import job_result
from ujobs.jobs.retry import Retry
from ujobs.limits import check_depth, check_text, text_problem
from ujobs.masking import redact_key

__all__ = [
    "DEFAULT_EVENT_POLL_MS",
    "MAX_CONCURRENCY_KEY_LENGTH",
    "MAX_IDEMPOTENCY_KEY_LENGTH",
    "NAME_PATTERN",
    "AnyJobHandle",
    "Concurrency",
    "JobDefinition",
    "JobHandle",
    "KeySpec",
    "KeyedConcurrency",
    "OnConflict",
    "RunFn",
    "TenantSpec",
    "WhenBusy",
    "claim_declared_name",
    "conflict_checked",
    "is_job_handle",
    "job",
    "reset_declared_names",
    "validate_concurrency",
    "validate_name",
]

InputT = TypeVar("InputT")


OnConflict = Literal["dedupe", "error"]


def _check_conflict(on_conflict: object) -> None:
    if on_conflict not in ("dedupe", "error"):
        raise InvariantError(f"on_conflict must be 'dedupe' or 'error', got {on_conflict!r}")


def conflict_checked(
    request: EnqueueRequest, answer: Enqueued, on_conflict: OnConflict
) -> Enqueued:
    """``answer``, unless ``on_conflict="error"`` and it is a dedupe (a live run holds the
    key): then ``X_JOB_DUPLICATE`` naming that run. The one rule of every enqueue path
    (``enqueue``, ``as_``, the HTTP edge's ``onConflict``)."""
    if answer.deduped and not answer.debounced and on_conflict == "error":
        raise JobDuplicateError(
            f"job {request.name!r}: a live run ({answer.id}) holds its idempotency key; wait for "
            "it, or enqueue with another key",
            # Masked as every document masks it: the key is computed from the input.
            meta={
                "job": request.name,
                "id": answer.id,
                "idempotency_key": redact_key(request.idempotency_key),
            },
        )
    return answer


class JobHandle(Generic[InputT]):
    """The surface of one job: enqueue it, describe it, drive its body by hand."""

    kind: Literal["job"] = "job"

    def __init__(self, definition: JobDefinition) -> None:
        self._definition = definition
        self._name = definition.name
        self._native = inspect.iscoroutinefunction(definition.run)

    # -- identity ------------------------------------------------------------------------
    @property
    def definition(self) -> JobDefinition:
        return self._definition

    @property
    def name(self) -> str:
        return self._name

    @property
    def explicit_name(self) -> bool:
        return self._definition.explicit_name

    def stamp_name(self, name: str) -> None:
        """Registry seam: a derived name takes the export name ``define_api`` found it under."""
        if not self._definition.explicit_name:
            self._name = validate_name(name)

    @property
    def module(self) -> str | None:
        """The module the body was written in; ``define_api`` stamps names only there."""
        return self._definition.module

    @property
    def retry(self) -> Retry:
        return self._definition.retry

    @property
    def queue(self) -> str:
        return self._definition.queue

    @property
    def concurrency(self) -> int | KeyedConcurrency | None:
        return self._definition.concurrency

    # -- input, keys, tenant -------------------------------------------------------------
    def parse_input(self, raw: Any) -> InputT:
        value: InputT = self._definition.input.parse({} if raw is None else raw)
        return value

    def dump_input(self, value: InputT) -> Any:
        return self._definition.input.dump(value)

    def idempotency_key_for(self, value: InputT) -> str:
        spec = self._definition.idempotency_key
        key = spec if isinstance(spec, str) else spec(value)
        return self._checked_key(key)

    def _checked_key(self, key: object) -> str:
        """An idempotency key within ``ujobs.limits`` (bytes of UTF-8, no NUL), whether the
        declaration answered it or the caller passed it."""
        problem = text_problem(key, MAX_IDEMPOTENCY_KEY_LENGTH)
        if problem is not None:
            raise IdempotencyRequiredError(
                f"job {self.name!r}: idempotency_key {problem} (a non-empty string of at most "
                f"{MAX_IDEMPOTENCY_KEY_LENGTH} bytes of UTF-8)",
                meta={"job": self.name, "maxBytes": MAX_IDEMPOTENCY_KEY_LENGTH},
            )
        assert isinstance(key, str)
        return key

    def tenant_for(self, value: InputT) -> str | None:
        spec = self._definition.tenant
        if spec == "none":
            return None
        assert callable(spec)
        tenant = spec(value)
        if not isinstance(tenant, str) or not tenant:
            raise JobTenantRequiredError(
                f"job {self.name!r}: tenant(input) answered {tenant!r}; it must name an org "
                "(declare tenant='none' for work that belongs to no tenant)",
                meta={"job": self.name},
            )
        # Past the limit before any statement: the live-key index holds the tenant.
        return check_text("tenant", tenant)

    def concurrency_key_for(self, value: InputT) -> str | None:
        """The keyed-concurrency lease key for this input, refused when empty or over-long."""
        conc = self._definition.concurrency
        if not isinstance(conc, KeyedConcurrency):
            return None
        key = conc.key(value)
        problem = text_problem(key, MAX_CONCURRENCY_KEY_LENGTH)
        if problem is not None:
            raise JobConcurrencyKeyInvalidError(
                f"job {self.name!r}: concurrency.key(input) {problem} (a non-empty string of at "
                f"most {MAX_CONCURRENCY_KEY_LENGTH} bytes of UTF-8: an id, never a payload)",
                meta={"job": self.name, "type": type(key).__name__},
            )
        assert isinstance(key, str)
        return key

    def slot_key_for(self, value: InputT) -> str | None:
        """The fleet slot's lease key of a run of this input (``ujobs.worker.concurrency``):
        ``job:<name>`` for a plain cap, ``job-key:<encoded name>:<key>`` for a keyed one, None
        without ``concurrency``. Raises as ``concurrency_key_for`` does."""
        conc = self._definition.concurrency
        if conc is None:
            return None
        if isinstance(conc, KeyedConcurrency):
            key = self.concurrency_key_for(value)
            assert key is not None
            return job_lease_key(self._name, key)
        return job_cap_key(self._name)

    # -- enqueue -------------------------------------------------------------------------
    def request(
        self,
        input: Any = None,
        *,
        run_id: str | None = None,
        job_id: str | None = None,
        delay: Duration | None = None,
        run_at_ms: int | None = None,
        queue: str | None = None,
        idempotency_key: str | None = None,
        enqueued_by: str | None = None,
        clock: Clock = SYSTEM_CLOCK,
        debounce: Duration | None = None,
        priority: int | None = None,
    ) -> EnqueueRequest:
        """The validated ``EnqueueRequest`` for ``input``; nothing invalid gets this far.

        Every text field is checked against ``ujobs.limits`` and the input's nesting before
        pydantic walks it (a dict or list as sent), or, for a model instance, in the form it
        is stored in."""
        dumped, _, key, tenant, slot_key = self._checked_input(input, idempotency_key)
        shared = shared_fields(
            self._definition,
            delay,
            run_at_ms,
            queue,
            run_id,
            enqueued_by,
            clock,
            debounce,
            priority,
        )
        return request_of(self._name, dumped, key, tenant, slot_key, shared, job_id, run_id)

    def _batch(
        self,
        inputs: Iterable[Any],
        delay: Duration | None,
        queue: str | None,
        debounce: Duration | None,
        priority: int | None,
    ) -> RequestRows:
        """``request(value, ...)`` for each value of ``inputs``, as the driver reads them
        (``ujobs.drivers.request_rows``): what every request of the batch shares (the
        options, the actor, the trace) is checked and read once, at the first value, and only
        the input, its key, its tenant and its slot key per value. A batch enqueue builds
        hundreds of requests per call."""
        d, name = self._definition, self._name
        fields: list[SharedFields] = []

        def share() -> EnqueueRequest:
            shared = shared_fields(
                d, delay, None, queue, None, None, SYSTEM_CLOCK, debounce, priority
            )
            fields.append(shared)
            return request_of(name, None, "", None, None, shared, None, None)

        def due() -> int:
            delay_ms = fields[0].delay_ms
            assert delay_ms is not None  # due is only given with a delay
            return SYSTEM_CLOCK.now_ms() + delay_ms  # each request's own clock read

        return RequestRows(inputs, self._checked_input, share, None if delay is None else due)

    def _checked_input(self, input: Any, idempotency_key: str | None = None) -> Checked:
        """The input as stored and its JSON text, its idempotency key, its tenant and its
        fleet slot's lease key (``slot_key_for``), each checked: the one per-input path of
        ``request`` and of every row of a batch."""
        d = self._definition
        raw = {} if input is None else input
        plain = isinstance(raw, (dict, list))
        if plain:
            check_depth(raw, "input")
        value = d.input.parse(raw)
        dumped, encoded = d.input.dump_encoded(value)
        if not plain:
            check_depth(dumped, "input")
        if idempotency_key is not None:
            key = self._checked_key(idempotency_key)
        else:
            key = self.idempotency_key_for(value)
        # A job with no tenant function and no concurrency (most) asks neither per input.
        tenant = None if d.tenant == "none" else self.tenant_for(value)
        slot_key = None if d.concurrency is None else self.slot_key_for(value)
        return dumped, encoded, key, tenant, slot_key

    async def enqueue(
        self,
        input: Any = None,
        *,
        run_id: str | None = None,
        delay: Duration | None = None,
        queue: str | None = None,
        on_conflict: OnConflict = "dedupe",
        debounce: Duration | None = None,
        priority: int | None = None,
    ) -> Enqueued:
        """Queue one run through the installed facade (joining the ambient transaction).

        A live run holding the idempotency key answers that run (``deduped=True``); with
        ``on_conflict="error"`` it is ``X_JOB_DUPLICATE`` naming it instead. ``debounce``
        overrides the declaration's for this enqueue (see ``job``): a run it moved answers
        ``debounced=True``, which ``on_conflict="error"`` does not refuse. ``priority`` (0
        first to 9) overrides the declaration's; out of range is ``X_PRIORITY_INVALID``."""
        _check_conflict(on_conflict)
        request = self.request(
            input, run_id=run_id, delay=delay, queue=queue, debounce=debounce, priority=priority
        )
        return conflict_checked(request, await jobs_facade().enqueue(request), on_conflict)

    async def enqueue_many(
        self,
        inputs: Iterable[Any],
        *,
        delay: Duration | None = None,
        queue: str | None = None,
        debounce: Duration | None = None,
        priority: int | None = None,
    ) -> list[Enqueued]:
        """Queue one run per input in one operation (the facade's ``enqueue_many``), answered
        in input order; an input whose key a live run (or an earlier input) holds is deduped.

        Each input is checked as the driver reads it, so on Postgres validating the later
        inputs overlaps inserting the earlier ones; a driver that writes rows itself reads
        each input's part and the shared fields without a request per input
        (``ujobs.drivers.request_rows``). A bad input anywhere queues none of them
        (``X_INPUT_INVALID`` with its path, as ``enqueue`` raises it)."""
        return await jobs_facade().enqueue_many(
            self._batch(inputs, delay, queue, debounce, priority)
        )

    async def as_(
        self,
        actor: Actor,
        input: Any = None,
        *,
        run_id: str | None = None,
        delay: Duration | None = None,
        queue: str | None = None,
        on_conflict: OnConflict = "dedupe",
        debounce: Duration | None = None,
        priority: int | None = None,
    ) -> Enqueued:
        """Queue on behalf of ``actor``: attribution (``enqueued_by``), never authority.

        The run's tenant is the actor's org (``actor.org_id``), so per-tenant limits apply to
        it — a ``tenant="none"`` job included. A job whose tenant is a function of the input
        must name the actor's own org, else ``X_JOB_TENANT_MISMATCH``: an actor cannot queue
        work under another org. An actor with no org leaves the declaration's tenant.
        """
        _check_conflict(on_conflict)
        with acting_as(actor):
            req = self.request(
                input,
                run_id=run_id,
                delay=delay,
                queue=queue,
                debounce=debounce,
                priority=priority,
            )
        if actor.org_id is not None and req.tenant_id is None:
            req = dataclasses.replace(req, tenant_id=actor.org_id)
        if actor.org_id is not None and req.tenant_id is not None and req.tenant_id != actor.org_id:
            raise JobTenantMismatchError(
                f"job {self.name!r}: the input names org {req.tenant_id!r} but the actor acts "
                f"for {actor.org_id!r}; an actor can only queue work for its own org (trusted "
                "code that spans orgs calls enqueue() instead)",
                meta={"job": self.name, "tenant": req.tenant_id, "actor_org": actor.org_id},
            )
        return conflict_checked(req, await jobs_facade().enqueue(req), on_conflict)

    async def result(self, job_id: str, *, timeout: Duration) -> Any:
        """The result of this job's run ``job_id`` once it settles, through the installed
        driver: the stored value, or its failure raised with its code, or ``X_TIMEOUT``
        (``ujobs.jobs.result_read``)."""
        return await job_result(job_id, timeout=timeout, name=self.name)

    # -- describe and run ----------------------------------------------------------------
    def describe(self) -> dict[str, Any]:
        """The manifest row: everything a dashboard or another language needs to call it."""
        d = self._definition
        conc: Any
        if isinstance(d.concurrency, KeyedConcurrency):
            conc = {
                "keyed": True,
                "limit": d.concurrency.limit,
                "whenBusy": d.concurrency.when_busy,
            }
        else:
            conc = d.concurrency
        return {
            "kind": "job",
            "name": self.name,
            "queue": d.queue,
            "description": d.description,
            "retry": d.retry.describe(),
            "timeoutMs": d.timeout_ms,
            "stepTimeoutMs": d.step_timeout_ms,
            "eventPollMs": d.event_poll_ms,
            "concurrency": conc,
            "tenant": "none" if d.tenant == "none" else "input",
            "onSettled": d.on_settled is not None,
            "debounceMs": d.debounce_ms,
            "uniqueForMs": d.unique_for_ms,
            "priority": d.priority,
            "input": d.input.json_schema(),
            "output": None if d.output is None else d.output.json_schema(),
        }

    async def run(self, run: Run[InputT]) -> Any:
        """Call the body directly — for a test that drives a run by hand. Never a second path
        to production: the worker calls this too, through ``execute_job`` (``start``)."""
        result = self._definition.run(run)
        if not inspect.isawaitable(result):
            raise declaration_invalid(self.name, "the body must be an async function")
        return await result

    def start(self, run: Run[InputT]) -> Coroutine[Any, Any, Any]:
        """The coroutine ``execute_job`` drives for ``run``: the body's own when the body is an
        ``async def`` (every ``@job``: no frame of this handle's between the worker and the
        body, on every resume), else ``run(run)``, which checks what a factory-made body
        answered. Calling an ``async def`` runs none of its code, so nothing the body does
        happens here."""
        if self._native:
            return cast("Coroutine[Any, Any, Any]", self._definition.run(run))
        return self.run(run)

    def __repr__(self) -> str:
        return f"JobHandle({self.name!r}, queue={self.queue!r})"


def _build(fn: RunFn, *, name: str | None, **options: Any) -> JobHandle[Any]:
    definition = build_definition(fn, name=name, **options)
    handle: JobHandle[Any] = JobHandle(definition)
    if definition.explicit_name:
        claim_declared_name(definition.name, handle, kind="job")
    return handle


@overload
def job(
    *,
    idempotency_key: KeySpec | None,
    tenant: TenantSpec | None,
    run: RunFn,
    name: str | None = ...,
    input: Any = ...,
    retry: Retry | Mapping[str, Any] | None = ...,
    queue: str = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: Concurrency | None = ...,
    on_settled: OnSettled | None = ...,
    description: str | None = ...,
    debounce: Duration | None = ...,
    unique_for: Duration | None = ...,
    output: Any = ...,
    priority: int = ...,
) -> JobHandle[Any]: ...


@overload
def job(
    *,
    idempotency_key: KeySpec | None,
    tenant: TenantSpec | None,
    run: None = ...,
    name: str | None = ...,
    input: Any = ...,
    retry: Retry | Mapping[str, Any] | None = ...,
    queue: str = ...,
    timeout: Duration | None = ...,
    step_timeout: Duration | None = ...,
    event_poll: Duration | None = ...,
    concurrency: Concurrency | None = ...,
    on_settled: OnSettled | None = ...,
    description: str | None = ...,
    debounce: Duration | None = ...,
    unique_for: Duration | None = ...,
    output: Any = ...,
    priority: int = ...,
) -> Callable[[RunFn], JobHandle[Any]]: ...


def job(
    *,
    idempotency_key: KeySpec | None,
    tenant: TenantSpec | None,
    run: RunFn | None = None,
    name: str | None = None,
    input: Any = None,
    retry: Retry | Mapping[str, Any] | None = None,
    queue: str = DEFAULT_QUEUE,
    timeout: Duration | None = None,
    step_timeout: Duration | None = None,
    event_poll: Duration | None = None,
    concurrency: Concurrency | None = None,
    on_settled: OnSettled | None = None,
    description: str | None = None,
    debounce: Duration | None = None,
    unique_for: Duration | None = None,
    output: Any = None,
    priority: int = DEFAULT_PRIORITY,
) -> JobHandle[Any] | Callable[[RunFn], JobHandle[Any]]:
    """Declare a job — as a decorator (``@job(...)`` on ``async def name(run)``) or a factory
    (``job(name=..., run=...)``, where ``name`` is required).

    ``idempotency_key`` and ``tenant`` have no defaults on purpose: queues deliver at least
    once, so every job must say how it is deduped and which org it acts under.

    ``debounce``: each enqueue is due ``debounce`` from now, and one made while a run with its
    key has not started yet moves that run there with the newer input instead of deduping
    (``Enqueued.debounced``). ``unique_for``: a run with the key that completed within the
    period still dedupes a new enqueue. Both are per key, within its tenant.

    ``priority``: every enqueue's priority unless it names its own, 0 (handed out first, the
    default) to 9 (last). A worker's claim takes due runs by priority, then by due time,
    across all its queues: see "Priority" in docs/guides/controlling-jobs.md for starvation.

    ``output`` declares the type of the body's return value (``t.object(...)``, a pydantic
    model, a dataclass or a TypedDict, as ``input``): the stored result is checked against it
    (``X_RESULT_INVALID`` when it does not match) and the OpenAPI document names it.
    """
    options: dict[str, Any] = {
        "input": input,
        "idempotency_key": idempotency_key,
        "tenant": tenant,
        "retry": retry,
        "queue": queue,
        "timeout": timeout,
        "step_timeout": step_timeout,
        "event_poll": event_poll,
        "concurrency": concurrency,
        "on_settled": on_settled,
        "description": description,
        "debounce": debounce,
        "unique_for": unique_for,
        "output": output,
        "priority": priority,
    }
    if run is not None:
        if name is None:
            raise JobDeclarationInvalidError(
                "job(run=...) needs name=: a factory-made job has no function name to take, and "
                "a name is the durable queue key",
                meta={"field": "name"},
            )
        return _build(run, name=name, **options)

    def decorate(fn: RunFn) -> JobHandle[Any]:
        if not inspect.iscoroutinefunction(fn):
            raise JobDeclarationInvalidError(
                f"@job decorates the body, which must be an async def; "
                f"{getattr(fn, '__name__', fn)!r} is not",
                meta={"job": getattr(fn, "__name__", None)},
            )
        return _build(fn, name=name, **options)

    return decorate


AnyJobHandle = JobHandle[Any]


def is_job_handle(value: Any) -> bool:
    return isinstance(value, JobHandle)
