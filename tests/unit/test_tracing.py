"""The job's span is a child of the enqueuer's: the same trace id under a new span id, a real
OpenTelemetry span when a tracer provider records, and a child traceparent without one."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support.execute import attempt, frozen_driver
from ujobs import tracing
from ujobs.context import current_traceparent, traced
from ujobs.drivers.base import EnqueueRequest
from ujobs.execution.run import Run
from ujobs.jobs.job import job
from ujobs.jobs.schema import t
from ujobs.tracing import child_traceparent, job_span, parse_traceparent

PARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracing.use_tracer_provider(provider)
    yield exporter
    tracing.use_tracer_provider(None)
    provider.shutdown()


def test_a_child_keeps_the_trace_and_flags_under_a_new_span() -> None:
    child = child_traceparent(PARENT)
    assert child is not None
    parsed = parse_traceparent(child)
    assert parsed is not None
    assert parsed[0] == "0af7651916cd43dd8448eb211c80319c"
    assert parsed[1] != "b7ad6b7169203331"
    assert parsed[2] == "01"
    assert child_traceparent(PARENT) != child
    for bad in (None, "", "garbage", "00-" + "0" * 32 + "-b7ad6b7169203331-01"):
        assert child_traceparent(bad) is None


def test_without_opentelemetry_the_attempt_runs_under_a_child_and_records_nothing(
    monkeypatch: pytest.MonkeyPatch, spans: InMemorySpanExporter
) -> None:
    monkeypatch.setattr(tracing, "_opentelemetry", lambda: None)
    with job_span("send", job_id="j", queue="default", attempt=1, parent=PARENT) as inside:
        assert inside is not None
        assert inside[:36] == PARENT[:36]
        assert inside != PARENT
    with job_span("send", job_id="j", queue="default", attempt=1, parent=None) as none:
        assert none is None
    assert spans.get_finished_spans() == ()


def _declare() -> Any:
    seen: dict[str, Any] = {}

    async def traced_body(run: Run[Any]) -> None:
        seen["inside"] = current_traceparent()
        request = fan_out.request({"n": 2})
        seen["fan_out"] = request.traceparent

    fan_out = job(
        input=t.object(n=t.number.int()),
        idempotency_key=lambda i: f"n:{i.n}",
        tenant="none",
        name="t.fan_out",
        run=traced_body,
    )
    return fan_out, seen


async def test_the_worker_opens_a_real_span_child_of_the_enqueuers(
    spans: InMemorySpanExporter,
) -> None:
    driver, _ = frozen_driver()
    handle, seen = _declare()
    with traced(PARENT):
        request = handle.request({"n": 1})
    assert request.traceparent == PARENT  # the enqueue stamps the caller's span
    queued = await driver.enqueue(request)
    execution = await attempt(driver, handle)
    assert execution.outcome == "completed"
    [span] = spans.get_finished_spans()
    assert span.name == "job t.fan_out"
    assert span.kind is SpanKind.CONSUMER
    assert span.parent is not None
    assert f"{span.parent.trace_id:032x}" == PARENT[3:35]
    assert f"{span.parent.span_id:016x}" == PARENT[36:52]
    context = span.get_span_context()
    assert context is not None
    assert f"{context.trace_id:032x}" == PARENT[3:35]
    assert span.attributes is not None
    assert span.attributes["messaging.message.id"] == queued.id
    # The body runs under the job's span, and what it enqueues is that span's child.
    assert seen["inside"] == f"00-{context.trace_id:032x}-{context.span_id:016x}-01"
    assert seen["fan_out"] == seen["inside"]


async def test_a_row_without_a_traceparent_starts_a_root_span(
    spans: InMemorySpanExporter,
) -> None:
    driver, _ = frozen_driver()
    handle, seen = _declare()
    await driver.enqueue(EnqueueRequest(name=handle.name, input={"n": 1}, idempotency_key="n:1"))
    assert (await attempt(driver, handle)).outcome == "completed"
    [span] = spans.get_finished_spans()
    assert span.parent is None
    assert parse_traceparent(seen["inside"]) is not None


def test_the_global_provider_is_asked_at_most_once_per_window_and_a_later_one_is_seen(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """OpenTelemetry's ``get_tracer_provider()`` reads the environment on every call until a
    provider is set: the worker asks it once per ``PROVIDER_RECHECK_S``, not once per attempt,
    and a provider an app sets after the worker started is used from the next window on."""
    from opentelemetry import trace

    now = [1_000.0]
    asked: list[Any] = []
    answer: list[Any] = [trace.ProxyTracerProvider()]

    def get_tracer_provider() -> Any:
        asked.append(answer[0])
        return answer[0]

    class Clock:
        @staticmethod
        def monotonic() -> float:
            return now[0]

    tracing.use_tracer_provider(None)
    monkeypatch.setattr(tracing, "time", Clock)
    monkeypatch.setattr(trace, "get_tracer_provider", get_tracer_provider)
    for _ in range(100):
        assert tracing._tracer(trace) is None
    assert len(asked) == 1
    answer[0] = TracerProvider()
    now[0] += tracing.PROVIDER_RECHECK_S / 2
    assert tracing._tracer(trace) is None  # still inside the window
    now[0] += tracing.PROVIDER_RECHECK_S
    assert tracing._tracer(trace) is not None
    assert len(asked) == 2
    tracing.use_tracer_provider(None)
