"""The job's trace span: a CHILD of the enqueuer's (spec § Trace and actor).

An enqueue stamps the current W3C ``traceparent`` on the row; the worker runs each attempt
under ``job_span``: with OpenTelemetry installed (the optional ``otel`` extra) and a tracer
provider configured, a real ``job <name>`` span whose parent is the enqueuer's span; without
one, no span is recorded and the attempt still runs under a child ``traceparent`` — the same
trace id, a new span id — so whatever the body enqueues joins the same trace. A row with no
(or a malformed) ``traceparent`` runs with none unless OpenTelemetry starts a root span.
"""

from __future__ import annotations

import functools
import os
import time
from typing import Any

_HEX = frozenset("0123456789abcdef")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """``(trace_id, span_id, flags)`` of a valid version-00 ``traceparent``, else None."""
    if value is None or len(value) != 55:
        return None
    text = value.lower()
    if text[:3] != "00-" or text[35] != "-" or text[52] != "-":
        return None
    trace_id, span_id, flags = text[3:35], text[36:52], text[53:]
    if not _HEX.issuperset(trace_id + span_id + flags):
        return None
    if trace_id == _ZERO_TRACE or span_id == _ZERO_SPAN:
        return None
    return trace_id, span_id, flags


def child_traceparent(parent: str | None) -> str | None:
    """A ``traceparent`` in the parent's trace under a fresh span id (None without a parent)."""
    parsed = parse_traceparent(parent)
    if parsed is None:
        return None
    trace_id, _, flags = parsed
    span_id = os.urandom(8).hex()
    while span_id == _ZERO_SPAN:
        span_id = os.urandom(8).hex()
    return f"00-{trace_id}-{span_id}-{flags}"


_provider: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Record job spans on ``provider`` instead of OpenTelemetry's global one (None: the
    global again, asked at once) — for an app that keeps several providers, and for tests."""
    global _provider, _unrecorded_until
    _provider = provider
    _unrecorded_until = 0.0


@functools.cache
def _opentelemetry() -> Any:
    """The OpenTelemetry API module, or None when the extra is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


@functools.cache
def _propagator() -> Any:
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    return TraceContextTextMapPropagator()


PROVIDER_RECHECK_S = 1.0
"""How long the answer "no provider records" is trusted: OpenTelemetry's
``get_tracer_provider()`` reads the environment on every call until a provider is set, a cost
the worker paid on every attempt; a provider set later is seen within this long."""

_unrecorded_until = 0.0


def _tracer(trace: Any) -> Any:
    """The tracer of the configured provider, or None while no provider records (the API's
    default proxy, or its no-op): then a span would cost time and record nothing."""
    global _unrecorded_until
    if _provider is None and time.monotonic() < _unrecorded_until:
        return None
    provider = _provider if _provider is not None else trace.get_tracer_provider()
    if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider):
        if _provider is None:
            _unrecorded_until = time.monotonic() + PROVIDER_RECHECK_S
        return None
    return provider.get_tracer("ultimate-jobs")


def live_tracer() -> Any:
    """The tracer a job span would record on, or None (no OpenTelemetry, or no provider that
    records): then an attempt needs no span object, only its child ``traceparent``."""
    trace = _opentelemetry()
    return None if trace is None else _tracer(trace)


class JobSpan:
    """One attempt's span; entering answers the ``traceparent`` the attempt runs under. A
    plain class (no generator frame): the worker enters one per attempt."""

    __slots__ = ("_attributes", "_name", "_parent", "_scope")

    def __init__(
        self, name: str, *, job_id: str, queue: str, attempt: int, parent: str | None
    ) -> None:
        self._name = name
        self._parent = parent
        self._attributes = (job_id, queue, attempt)
        self._scope: Any = None

    def __enter__(self) -> str | None:
        tracer = live_tracer()
        if tracer is None:
            return child_traceparent(self._parent)
        trace = _opentelemetry()
        context = None
        if parse_traceparent(self._parent) is not None:
            context = _propagator().extract({"traceparent": str(self._parent)})
        job_id, queue, attempt = self._attributes
        self._scope = tracer.start_as_current_span(
            f"job {self._name}",
            context=context,
            kind=trace.SpanKind.CONSUMER,
            attributes={
                "messaging.system": "ultimate-jobs",
                "messaging.destination.name": queue,
                "messaging.message.id": job_id,
                "ujobs.job.name": self._name,
                "ujobs.job.attempt": attempt,
            },
        )
        span = self._scope.__enter__()
        if not span.is_recording():  # a sampler that dropped it: the trace still flows
            return child_traceparent(self._parent)
        ctx = span.get_span_context()
        return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"

    def __exit__(self, *exc: Any) -> None:
        if self._scope is not None:
            self._scope.__exit__(*exc)
            self._scope = None


def job_span(name: str, *, job_id: str, queue: str, attempt: int, parent: str | None) -> JobSpan:
    """``with job_span(...) as traceparent:`` runs one attempt under the job's span."""
    return JobSpan(name, job_id=job_id, queue=queue, attempt=attempt, parent=parent)
