"""The job's trace span: a CHILD of the enqueuer's (spec § Trace and actor).

An enqueue stamps the current W3C ``traceparent`` on the row; the worker runs each attempt
under ``job_span``: with OpenTelemetry installed (the optional ``otel`` extra) and a tracer
provider configured, a real ``job <name>`` span whose parent is the enqueuer's span; without
one, no span is recorded and the attempt still runs under a child ``traceparent`` — the same
trace id, a new span id — so whatever the body enqueues joins the same trace. A row with no
(or a malformed) ``traceparent`` runs with none unless OpenTelemetry starts a root span.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

_TRACEPARENT = re.compile(r"^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$")
_ZERO_TRACE = "0" * 32
_ZERO_SPAN = "0" * 16


def parse_traceparent(value: str | None) -> tuple[str, str, str] | None:
    """``(trace_id, span_id, flags)`` of a valid version-00 ``traceparent``, else None."""
    if value is None:
        return None
    match = _TRACEPARENT.match(value.strip().lower())
    if match is None or match[1] == _ZERO_TRACE or match[2] == _ZERO_SPAN:
        return None
    return match[1], match[2], match[3]


def child_traceparent(parent: str | None) -> str | None:
    """A ``traceparent`` in the parent's trace under a fresh span id (None without a parent)."""
    parsed = parse_traceparent(parent)
    if parsed is None:
        return None
    trace_id, _, flags = parsed
    span_id = _ZERO_SPAN
    while span_id == _ZERO_SPAN:
        span_id = os.urandom(8).hex()
    return f"00-{trace_id}-{span_id}-{flags}"


_provider: Any = None


def use_tracer_provider(provider: Any) -> None:
    """Record job spans on ``provider`` instead of OpenTelemetry's global one (None: the
    global again) — for an app that keeps several providers, and for tests."""
    global _provider
    _provider = provider


def _opentelemetry() -> Any:
    """The OpenTelemetry API module, or None when the extra is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


@contextmanager
def job_span(
    name: str, *, job_id: str, queue: str, attempt: int, parent: str | None
) -> Iterator[str | None]:
    """Run one attempt under the job's span; yields the ``traceparent`` the attempt runs under."""
    trace = _opentelemetry()
    if trace is None:
        yield child_traceparent(parent)
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    context = None
    if parse_traceparent(parent) is not None:
        context = TraceContextTextMapPropagator().extract({"traceparent": str(parent)})
    tracer = trace.get_tracer("ultimate-jobs", tracer_provider=_provider)
    attributes = {
        "messaging.system": "ultimate-jobs",
        "messaging.destination.name": queue,
        "messaging.message.id": job_id,
        "ujobs.job.name": name,
        "ujobs.job.attempt": attempt,
    }
    with tracer.start_as_current_span(
        f"job {name}", context=context, kind=trace.SpanKind.CONSUMER, attributes=attributes
    ) as span:
        if not span.is_recording():
            # The API alone (no SDK, no provider): nothing is recorded, the trace still flows.
            yield child_traceparent(parent)
            return
        ctx = span.get_span_context()
        yield f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
