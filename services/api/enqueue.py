"""``POST /v1/jobs/{name}``, ``POST /v1/jobs/{name}/batch``, ``POST /v1/events/{name}``.

An input is validated by the job's own ``JobHandle.request`` — the code path of
``job.enqueue`` — with the token as the enqueuer, so the schema, the idempotency key,
``tenant(input)`` and ``enqueued_by`` (the token's id, as ``job.as_(actor)`` records an
actor's) are exactly a Python enqueue's. A tenant token then may queue only its own tenant's
work (``X_TENANCY_ACTOR_MISMATCH``, 403).

| Route | Scope | Answers |
|---|---|---|
| ``POST /v1/jobs/{name}`` ``{"input", "runId"?, "delay"?, "debounce"?, "priority"?, "queue"?, "onConflict"?, "parentId"?}`` | ``enqueue:<name>`` (``parentId``: an operator token, ``enqueue_child.py``) | 202 ``{"id", "runId", "deduped", "debounced"}``; with ``"onConflict": "error"`` a live run holding the key is 409 ``X_JOB_DUPLICATE`` (``meta.id`` names it), unless the enqueue debounced it; with ``?wait=30s`` enqueue and wait: 200 with the run's result once it settles, 202 with its state when the wait runs out (``results.py``) |
| ``POST /v1/jobs/{name}/batch`` ``{"inputs": [...], "delay"?, "debounce"?, "priority"?, "queue"?, "onConflict"?}`` | ``enqueue:<name>`` | 202 ``{"jobs": [{"id", "runId", "deduped", "debounced"}, ...]}`` in input order; at most ``MAX_BATCH_INPUTS``; under ``"onConflict": "error"`` all new or 409 and none (a debounce or a job's ``unique_for`` there is 400 ``X_ENQUEUE_OPTION_UNSUPPORTED``) |
| ``POST /v1/events/{name}`` ``{"payload"}`` | ``events:publish`` | 202 ``{"id", "name", "publishedAtMs", "expiresAtMs"}``; the event carries the token's tenant: it resumes only that tenant's waits (an operator's, every wait) |

A batch is all or nothing, through the driver's ``enqueue_many`` (the path of
``job.enqueue_many``): one refused input refuses the batch, nothing is queued, and the error's
``meta.failures`` names every failing index with its own code.

``debounce`` (a duration, as ``delay``) overrides the job's declared one for this enqueue:
a run with the key that has not started yet is moved to now + debounce with this input
(``debounced: true``, ``deduped: true``). The key is the tenant's own (a tenant token's row
carries its tenant), so a tenant debounces only its own runs.

``priority`` (a whole number, 0 first to 9 last) overrides the job's declared one (0 unless it
declares one); anything else is 400 ``X_PRIORITY_INVALID`` and nothing is queued.
"""  # noqa: E501

from __future__ import annotations

import dataclasses
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, Protocol, cast

from aiohttp import web

from ujobs.clock import Clock
from ujobs.drivers.base import (
    MAX_QUEUE_CONTROL_MS,
    Enqueued,
    EnqueueRequest,
    JobDriver,
    check_priority,
)
from ujobs.durations import duration_ms
from ujobs.errors import (
    InputInvalidError,
    InvariantError,
    JobDuplicateError,
    JobUnknownError,
    NotImplementedByDriverError,
    TenancyActorMismatchError,
    UltimateError,
)
from ujobs.events.bus import publish_event
from ujobs.jobs.job import JobHandle, OnConflict, conflict_checked
from ujobs.jobs.registry import Registry
from ujobs.limits import check_text
from ujobs.services.api.auth import (
    Principal,
    TokenLookup,
    UnauthorizedError,
    authenticate,
    authenticate_known,
    bearer_secret,
)
from ujobs.services.api.common import EDGE, REGISTRY, accepted, caller, read_object
from ujobs.services.api.enqueue_batcher import EnqueueBatcher
from ujobs.services.api.enqueue_child import enqueue_under, parent_of
from ujobs.services.api.ratelimit import TokenBuckets
from ujobs.services.api.results import results_or_refuse, settled_response, wait_for, wait_of
from ujobs.services.api.token_facts import KnownTokens

MAX_BATCH_INPUTS = 1_000
"""The most inputs one ``/batch`` request carries (``MAX_BULK_ROWS`` of the operator surface)."""
MAX_DELAY_MS = 10 * 365 * 86_400_000
"""The longest ``delay`` an HTTP enqueue takes: past it a run time would leave what the
database's timestamps hold long before it left any plan worth queueing."""

routes = web.RouteTableDef()

SINGLE_FIELDS = frozenset(
    {"input", "runId", "delay", "debounce", "priority", "queue", "onConflict", "parentId"}
)
"""A single enqueue's body on HTTP and NATS request/reply."""
STREAM_FIELDS = SINGLE_FIELDS - {"onConflict"}
"""A single enqueue's body on the NATS enqueue stream: a redelivered message meets the row
its first delivery made (its job id is derived from the message), a dedupe that must not
be refused, and a stream message has nobody to answer a conflict to."""
ON_CONFLICT_MODES = ("dedupe", "error")
_BATCH_FIELDS = frozenset({"inputs", "delay", "debounce", "priority", "queue", "onConflict"})
_EVENT_FIELDS = frozenset({"payload"})


def _handle(request: web.Request) -> JobHandle[Any]:
    return job_handle(request.app[REGISTRY], request.match_info["job"])


def job_handle(registry: Registry, name: str) -> JobHandle[Any]:
    """The job ``name`` names in the app (404 ``X_JOB_UNKNOWN`` when none; a name past
    ``ujobs.limits`` is 400, as every other field past its limit)."""
    handle = registry.job(check_text("name", name))
    if handle is None:
        raise JobUnknownError(
            f"no job is named {name!r} in this app; GET /v1/manifest lists them",
            meta={"job": name},
        )
    return handle


def _field(body: dict[str, Any], key: str, kinds: tuple[type, ...], what: str) -> Any:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise InputInvalidError(
            f"{key} must be {what}", meta={"issues": [{"path": key, "message": what}]}
        )
    return value


def _options(body: dict[str, Any]) -> dict[str, Any]:
    queue = _field(body, "queue", (str,), "a queue name")
    delay = _duration(body, "delay", MAX_DELAY_MS, "10 years")
    debounce = _duration(body, "debounce", MAX_QUEUE_CONTROL_MS, "a year")
    if debounce == 0:
        raise InputInvalidError(
            "debounce must be above zero; leave it out for none",
            meta={"issues": [{"path": "debounce", "message": "zero"}]},
        )
    priority = body.get("priority")
    if priority is not None:
        check_priority(priority)  # 400 X_PRIORITY_INVALID naming the field
    return {"delay": delay, "queue": queue, "debounce": debounce, "priority": priority}


def _duration(body: dict[str, Any], key: str, most: int, most_text: str) -> int | None:
    """``body[key]`` as milliseconds (a duration like ``'10s'``, or a number of ms): 400
    naming the field when it is none, or longer than ``most``."""
    value = _field(body, key, (str, int), "a duration ('10s', '3d') or milliseconds")
    if value is None:
        return None
    try:
        ms = duration_ms(value, field=key)
    except InvariantError as exc:
        raise InputInvalidError(
            exc.message, meta={"issues": [{"path": key, "message": "duration"}]}
        ) from None
    if ms > most:
        raise InputInvalidError(
            f"{key} is at most {most} ms ({most_text})",
            meta={"issues": [{"path": key, "message": "too long"}]},
        )
    return ms


def single_options(body: dict[str, Any]) -> dict[str, Any]:
    """``runId``, ``delay``, ``debounce``, ``priority`` and ``queue`` of a single enqueue's
    body, checked (400 naming the field): the HTTP route's and the NATS edge's one reading."""
    run_id = _field(body, "runId", (str,), "a string")
    if run_id is not None:
        check_text("runId", run_id)
    return {"run_id": run_id, **_options(body)}


def on_conflict_of(body: dict[str, Any]) -> OnConflict:
    """``onConflict``: ``dedupe`` (the default: a live run holding the key is the answer,
    ``deduped: true``) or ``error`` (that run is 409 ``X_JOB_DUPLICATE``); else 400."""
    mode = body.get("onConflict", "dedupe")
    if mode == "dedupe" or mode == "error":
        return cast("OnConflict", mode)
    raise InputInvalidError(
        f"onConflict must be one of {', '.join(ON_CONFLICT_MODES)}",
        meta={"issues": [{"path": "onConflict", "message": "dedupe or error"}]},
    )


def build_request(
    handle: JobHandle[Any], principal: Principal, value: Any, clock: Clock, **options: Any
) -> EnqueueRequest:
    """``handle.request`` (``job.enqueue``'s own path) with the token as the enqueuer, then the
    token's tenancy rule; ``clock`` (the driver's) dates a ``delay``.

    A tenant-free job (``tenant="none"``) queued with a tenant token is stamped with the
    token's tenant, as ``job.as_(actor, ...)`` stamps the actor's org (the spec's ``as()``):
    per-tenant limits apply, the tenant reads its own row, and its idempotency keys are its
    own. The body still runs with no org (it runs under the tenant it declared). An operator
    token leaves the row tenant-free."""
    try:
        req = handle.request(value, clock=clock, enqueued_by=principal.token_id, **options)
    except InvariantError as exc:
        # Whatever the request refuses here came in the caller's body: its input, not ours.
        raise InputInvalidError(exc.message, meta=exc.meta) from None
    if req.tenant_id is None and principal.tenant_id is not None:
        req = dataclasses.replace(req, tenant_id=principal.tenant_id)
    principal.check_enqueue_tenant(handle.name, req.tenant_id)
    return req


def enqueued_json(answer: Enqueued) -> dict[str, Any]:
    return {
        "id": answer.id,
        "runId": answer.run_id,
        "deduped": answer.deduped,
        "debounced": answer.debounced,
    }


class EnqueuePath(Protocol):
    """What a single enqueue runs on: the api's ``Edge`` (HTTP) and ``NatsEdge`` alike."""

    @property
    def driver(self) -> JobDriver: ...
    @property
    def tokens(self) -> TokenLookup: ...
    @property
    def batcher(self) -> EnqueueBatcher: ...
    @property
    def buckets(self) -> TokenBuckets | None: ...
    @property
    def known(self) -> KnownTokens | None: ...


async def enqueue_one(
    path: EnqueuePath,
    registry: Registry,
    job: str,
    authorization: str | None,
    read_body: Callable[[], Awaitable[dict[str, Any]]],
    *,
    limited: bool = True,
    job_id: str | None = None,
    debounce_seq: int | None = None,
) -> dict[str, Any]:
    """One enqueue of ``job`` as the token behind ``authorization``, answered once its row
    is committed: ``POST /v1/jobs/{name}``, the NATS request and the NATS stream message are
    this one function (the rules live once). Refusals in the edges' order: who (401), how
    often (429, with ``limited``), then what (``read_body``, the job, its scope,
    ``onConflict``, the options, the input).

    With ``path.known`` (Postgres: the token's fixed facts kept in process), a token seen
    live before is not read again: its insert checks it is still live (``revoked`` inserts
    nothing; 401, and it is forgotten, so its next request reads the table). A request refused
    before that statement reads its token first, so a revoked token is 401 before any other
    refusal. ``job_id`` (the stream form's derived id) makes a redelivery meet its own row, and
    ``debounce_seq`` (its stream sequence) keeps a redelivered debounce from moving a run a
    newer message moved (``EnqueueRequest.debounce_seq``)."""
    principal, unchecked = await enqueue_principal(path, authorization, limited=limited)
    try:
        body = await read_body()
        clock = path.driver.clock
        req, on_conflict = single_request(
            registry, principal, job, body, clock, job_id=job_id, debounce_seq=debounce_seq
        )
        parent_id = parent_of(body, principal)
    except UltimateError:
        if unchecked is not None:
            await authenticate(path.tokens, authorization, path.driver.clock.now_ms())
        raise
    if parent_id is not None:
        if unchecked is not None:  # the child's statement checks no token: read it now
            await authenticate(path.tokens, authorization, path.driver.clock.now_ms())
        answer = await enqueue_under(path.driver, req, parent_id)
        return enqueued_json(conflict_checked(req, answer, on_conflict))
    try:
        answer = await path.batcher.enqueue(req, token_id=unchecked)
    except UnauthorizedError:
        if path.known is not None:
            path.known.forget(bearer_secret(authorization))
        raise
    # A dedupe inserted nothing, so refusing it now leaves nothing queued by this request.
    return enqueued_json(conflict_checked(req, answer, on_conflict))


def single_request(
    registry: Registry,
    principal: Principal,
    job: str,
    body: dict[str, Any],
    clock: Clock,
    *,
    job_id: str | None = None,
    debounce_seq: int | None = None,
) -> tuple[EnqueueRequest, OnConflict]:
    """The request a single enqueue's ``body`` asks for, as ``principal``, and its
    ``onConflict``: the job (404), its scope (403), then the body's fields and input (400).
    ``debounce_seq`` goes on a request that debounces (the stream form's sequence)."""
    handle = job_handle(registry, job)
    principal.require(f"enqueue:{handle.name}")
    on_conflict = on_conflict_of(body)
    options = single_options(body)
    req = build_request(handle, principal, body.get("input"), clock, job_id=job_id, **options)
    if debounce_seq is not None and req.debounce_ms is not None:
        req = dataclasses.replace(req, debounce_seq=debounce_seq)
    return req, on_conflict


async def enqueue_principal(
    path: EnqueuePath, authorization: str | None, *, limited: bool
) -> tuple[Principal, str | None]:
    """The caller, within its rate when ``limited``, and the token id its insert must check
    (None: the token was read just now, or this driver cannot check it in the insert): the
    single enqueue's reading of a token, and the NATS enqueue stream's for each batch."""
    now_ms = path.driver.clock.now_ms()
    if path.known is None:
        principal = await authenticate(path.tokens, authorization, now_ms)
        unchecked = None
    else:
        principal, read = await authenticate_known(path.known, path.tokens, authorization, now_ms)
        unchecked = None if read else principal.token_id
    if limited and path.buckets is not None:
        path.buckets.take(principal.token_id)
    return principal, unchecked


# ``{job}`` is the job's NAME here and a job's ID on the GET and DELETE of the same path:
# one path template, as OpenAPI requires of routes that differ only in their method.
@routes.post("/v1/jobs/{job}")
async def enqueue(request: web.Request) -> web.Response:
    # ?wait is read first: a bad one refuses the request before anything is queued.
    wait = wait_of(request) if request.query else None
    if wait is not None:
        results_or_refuse(request.app[EDGE].driver)
    answer = await enqueue_one(
        request.app[EDGE],
        request.app[REGISTRY],
        request.match_info["job"],
        request.headers.get("Authorization"),
        lambda: read_object(request, SINGLE_FIELDS),
    )
    if wait is None:
        return accepted(answer)
    # Enqueue and wait (a synchronous call for callers in any language): the run this request
    # queued, or the live run of the token's tenant its key deduped to.
    results = results_or_refuse(request.app[EDGE].driver)
    row = await results.read(answer["id"])
    if row is None:
        return accepted({**answer, "state": "ready", "result": None, "error": None})
    settled = await wait_for(results, row, wait)
    return settled_response(
        settled,
        {"runId": answer["runId"], "deduped": answer["deduped"], "debounced": answer["debounced"]},
    )


@routes.post("/v1/jobs/{job}/batch")
async def enqueue_batch(request: web.Request) -> web.Response:
    principal = await caller(request)
    body = await read_object(request, _BATCH_FIELDS)
    handle = _handle(request)
    principal.require(f"enqueue:{handle.name}")
    inputs = body.get("inputs")
    if not isinstance(inputs, list) or not 0 < len(inputs) <= MAX_BATCH_INPUTS:
        raise InputInvalidError(
            f"inputs must be a list of 1-{MAX_BATCH_INPUTS} inputs",
            meta={"issues": [{"path": "inputs", "message": "list"}], "max": MAX_BATCH_INPUTS},
        )
    options = _options(body)
    if on_conflict_of(body) == "error":
        return await _enqueue_all_new(request, handle, principal, inputs, options)
    driver = request.app[EDGE].driver
    failures: list[dict[str, Any]] = []

    def requests() -> Iterator[EnqueueRequest]:
        # Built as the driver reads them (on Postgres, while the COPY of the earlier ones is
        # on the wire), exactly as job.enqueue_many does. The first refusal stops the
        # statement; nothing of the batch is inserted.
        for index, value in enumerate(inputs):
            try:
                yield build_request(handle, principal, value, driver.clock, **options)
            except UltimateError as exc:
                failures.append({"index": index, **exc.to_dict()})
                raise

    try:
        answers = await driver.enqueue_many(requests())
    except UltimateError:
        if not failures:
            raise
        # Name every refused input, not only the first: check the ones after it too.
        for index in range(failures[0]["index"] + 1, len(inputs)):
            try:
                build_request(handle, principal, inputs[index], driver.clock, **options)
            except UltimateError as exc:
                failures.append({"index": index, **exc.to_dict()})
        raise _batch_refused(handle.name, failures, len(inputs)) from None
    return accepted({"jobs": [enqueued_json(a) for a in answers]})


async def _enqueue_all_new(
    request: web.Request,
    handle: JobHandle[Any],
    principal: Principal,
    inputs: list[Any],
    options: dict[str, Any],
) -> web.Response:
    """``/batch`` under ``onConflict: error``: every input a new job, or 409 naming each input
    a live run (or an earlier input of the batch) holds, and nothing queued."""
    edge = request.app[EDGE]
    if edge.strict is None:
        raise NotImplementedByDriverError(
            'onConflict "error" on /batch needs the Postgres driver (UJOBS_DRIVER=postgres); '
            "send the inputs one by one, or leave onConflict out to dedupe",
            meta={"driver": edge.driver.name},
        )
    failures: list[dict[str, Any]] = []
    built: list[EnqueueRequest] = []
    for index, value in enumerate(inputs):
        try:
            built.append(build_request(handle, principal, value, edge.driver.clock, **options))
        except UltimateError as exc:
            failures.append({"index": index, **exc.to_dict()})
    if failures:
        raise _batch_refused(handle.name, failures, len(inputs))
    try:
        answers = await edge.strict.enqueue(built)
    except JobDuplicateError as exc:
        conflicts = exc.meta.get("conflicts")
        if not isinstance(conflicts, list):
            raise
        raise _batch_conflicts(handle.name, conflicts, len(inputs)) from None
    return accepted({"jobs": [enqueued_json(a) for a in answers]})


def _batch_conflicts(job: str, conflicts: list[dict[str, Any]], total: int) -> UltimateError:
    """The driver's conflicts in the shape of every refused batch: ``meta.failures``, one per
    input, each with its own code and what holds its key."""
    failures = []
    for conflict in conflicts:
        index = conflict["index"]
        if conflict.get("id") is not None:
            message = f"input {index}: a live run ({conflict['id']}) holds its idempotency key"
            meta: dict[str, Any] = {"id": conflict["id"]}
        else:
            message = f"input {index} has the idempotency key of input {conflict['sameAs']}"
            meta = {"sameAs": conflict["sameAs"]}
        failures.append(
            {"index": index, "code": JobDuplicateError.code, "message": message, "meta": meta}
        )
    return _batch_refused(job, failures, total)


def _batch_refused(job: str, failures: list[dict[str, Any]], total: int) -> UltimateError:
    """A tenancy refusal anywhere makes the batch 403; otherwise the inputs' own 400."""
    meta = {"job": job, "failures": failures, "inputs": total}
    indexes = ", ".join(str(f["index"]) for f in failures[:20])
    more = f" and {len(failures) - 20} more" if len(failures) > 20 else ""
    message = (
        f"job {job!r}: {len(failures)} of {total} inputs refused (index {indexes}{more}); "
        "nothing was queued"
    )
    if any(f["code"] == TenancyActorMismatchError.code for f in failures):
        return TenancyActorMismatchError(message, meta=meta)
    if all(f["code"] == JobDuplicateError.code for f in failures):
        return JobDuplicateError(message, meta=meta)
    return InputInvalidError(message, meta=meta)


@routes.post("/v1/events/{name}")
async def publish(request: web.Request) -> web.Response:
    principal = await caller(request, "events:publish")
    body = await read_object(request, _EVENT_FIELDS)
    name = check_text("eventName", request.match_info["name"])
    # A tenant token's event reaches only its tenant's waiters; an operator's, every waiter.
    record = await publish_event(name, body.get("payload"), tenant=principal.tenant_id)
    return accepted(
        {
            "id": record.id,
            "name": record.name,
            "publishedAtMs": record.published_at_ms,
            "expiresAtMs": record.expires_at_ms,
        }
    )


__all__ = [
    "MAX_BATCH_INPUTS",
    "SINGLE_FIELDS",
    "STREAM_FIELDS",
    "EnqueuePath",
    "build_request",
    "enqueue_one",
    "enqueue_principal",
    "enqueued_json",
    "job_handle",
    "routes",
    "single_options",
    "single_request",
]
