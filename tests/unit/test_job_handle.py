"""§ The handle is the surface: ``enqueue``, ``as_``, ``describe``, ``run`` — and everything
refused at enqueue is refused before anything is queued."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from tests.unit.conftest import RecordingFacade
from ujobs import Actor, Retry, Run, Signal, is_final_attempt, job, t
from ujobs.clock import FrozenClock
from ujobs.context import acting_as, traced
from ujobs.drivers.memory.driver import memory_driver
from ujobs.errors import (
    DriverUnavailableError,
    IdempotencyRequiredError,
    InputInvalidError,
    InvariantError,
    JobDeclarationInvalidError,
    JobTenantMismatchError,
    JobTenantRequiredError,
)
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.job import MAX_CONCURRENCY_KEY_LENGTH, JobHandle, RunFn

ORG = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"
OTHER_ORG = "7d1f2b9a-3c4e-4f5a-8b6c-9d0e1f2a3b4c"


def order_job(**overrides: Any) -> JobHandle[Any]:
    options: dict[str, Any] = {
        "input": t.object(org_id=t.uuid, items=t.array(t.object(id=t.string))),
        "idempotency_key": lambda i: f"order:{i.org_id}:{len(i.items)}",
        "tenant": lambda i: i.org_id,
        "retry": Retry(attempts=4),
        "queue": "orders",
    }
    options.update(overrides)
    declare: Callable[[RunFn], JobHandle[Any]] = job(**options)

    @declare
    async def place_order(run: Run[Any]) -> str:
        """Place an order."""
        return f"placed {len(run.input.items)}"

    return place_order


GOOD = {"org_id": ORG, "items": [{"id": "a"}]}


# --- no driver: validation comes first, then X_DRIVER_UNAVAILABLE ---------------------------


async def test_invalid_input_is_refused_with_its_path_before_the_driver_is_asked() -> None:
    handle = order_job()
    with pytest.raises(InputInvalidError) as info:
        await handle.enqueue({"org_id": ORG, "items": [{"id": 1}]})
    assert info.value.code == "X_INPUT_INVALID"
    assert [i["path"] for i in info.value.meta["issues"]] == ["items.0.id"]


async def test_a_valid_enqueue_with_no_driver_is_x_driver_unavailable_not_a_dropped_job() -> None:
    with pytest.raises(DriverUnavailableError) as info:
        await order_job().enqueue(GOOD)
    assert info.value.code == "X_DRIVER_UNAVAILABLE"
    assert "set_job_driver" in info.value.message


async def test_invalid_input_queues_nothing(queued: RecordingFacade) -> None:
    handle = order_job()
    for bad in ({"org_id": ORG}, {"org_id": "x", "items": []}, None, {**GOOD, "extra": 1}):
        with pytest.raises(InputInvalidError):
            await handle.enqueue(bad)
    assert queued.requests == []


async def test_enqueue_many_answers_in_order_dedupes_and_queues_nothing_on_a_bad_input() -> None:
    handle = order_job()
    driver = memory_driver(clock=FrozenClock())
    set_job_driver(driver)
    try:
        two = {"org_id": ORG, "items": [{"id": "a"}, {"id": "b"}]}
        with pytest.raises(InputInvalidError) as info:
            await handle.enqueue_many([GOOD, two, {"org_id": ORG, "items": [{"id": 1}]}])
        assert [i["path"] for i in info.value.meta["issues"]] == ["items.0.id"]
        assert (await driver.stats()).queues == {}  # nothing queued
        answers = await handle.enqueue_many(iter([GOOD, two, GOOD]))  # any iterable
        assert [a.deduped for a in answers] == [False, False, True]
        assert answers[2].id == answers[0].id
        assert (await driver.stats()).queues["orders"].ready == 2
    finally:
        set_job_driver(None)


# --- what an enqueue hands the queue ---------------------------------------------------------


async def test_enqueue_hands_the_queue_the_validated_stored_form(queued: RecordingFacade) -> None:
    handle = order_job()
    with traced("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"):
        result = await handle.enqueue({"org_id": ORG.upper(), "items": [{"id": "a"}]})
    assert result.id == "job-1"
    [request] = queued.requests
    assert request.name == "place_order"
    assert request.input == GOOD  # canonical, JSON-shaped
    assert request.idempotency_key == f"order:{ORG}:1"
    assert request.tenant_id == ORG
    assert request.queue == "orders"
    assert request.max_attempts == 4
    assert request.traceparent == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert request.enqueued_by is None
    assert request.run_at_ms is None


async def test_run_id_and_queue_options(queued: RecordingFacade) -> None:
    result = await order_job().enqueue(GOOD, run_id="run-named", queue="orders-slow")
    assert result.run_id == "run-named"
    assert queued.requests[0].run_id == "run-named"
    assert queued.requests[0].queue == "orders-slow"
    with pytest.raises(JobDeclarationInvalidError):
        await order_job().enqueue(GOOD, queue="bad queue")
    assert len(queued.requests) == 1


def test_a_delay_is_counted_from_the_clock() -> None:
    clock = FrozenClock(1_000_000)
    assert order_job().request(GOOD, delay="3d", clock=clock).run_at_ms == 1_000_000 + 259_200_000
    assert order_job().request(GOOD, run_at_ms=5).run_at_ms == 5
    with pytest.raises(InvariantError):
        order_job().request(GOOD, delay="1s", run_at_ms=5)
    with pytest.raises(InvariantError):
        order_job().request(GOOD, delay="-1s")


def test_an_enqueue_inside_an_actors_context_records_who_asked() -> None:
    with acting_as(Actor(id="user-1", org_id=ORG)):
        assert order_job().request(GOOD).enqueued_by == "user-1"


@pytest.mark.parametrize("answer", ["", 42, None, "k" * 501])
def test_an_idempotency_key_answering_nonsense_is_refused(answer: Any) -> None:
    with pytest.raises(IdempotencyRequiredError):
        order_job(idempotency_key=lambda i: answer).request(GOOD)


@pytest.mark.parametrize("answer", [None, "", 7])
def test_a_tenant_function_answering_no_org_is_refused(answer: Any) -> None:
    with pytest.raises(JobTenantRequiredError) as info:
        order_job(tenant=lambda i: answer).request(GOOD)
    assert "tenant='none'" in info.value.message


def test_tenant_none_carries_no_org() -> None:
    assert order_job(tenant="none").request(GOOD).tenant_id is None


# --- § One run per key: the key is checked at enqueue ----------------------------------------


@pytest.mark.parametrize(
    "answer", ["", 17, None, b"bytes", "k" * (MAX_CONCURRENCY_KEY_LENGTH + 1)], ids=repr
)
async def test_a_concurrency_key_answering_nonsense_is_refused_at_enqueue(
    answer: Any, queued: RecordingFacade
) -> None:
    handle = order_job(concurrency={"key": lambda i: answer, "limit": 1})
    with pytest.raises(JobDeclarationInvalidError) as info:
        await handle.enqueue(GOOD)
    assert info.value.code == "X_JOB_DECLARATION_INVALID"
    assert "concurrency.key" in info.value.message
    assert queued.requests == []


async def test_a_concurrency_key_is_refused_before_the_driver_too() -> None:
    handle = order_job(concurrency={"key": lambda i: "", "limit": 1})
    with pytest.raises(JobDeclarationInvalidError):
        await handle.enqueue(GOOD)


def test_a_concurrency_key_of_exactly_200_characters_is_accepted() -> None:
    key = "k" * MAX_CONCURRENCY_KEY_LENGTH
    handle = order_job(concurrency={"key": lambda i: key})
    assert handle.concurrency_key_for(handle.parse_input(GOOD)) == key
    assert order_job().concurrency_key_for(order_job().parse_input(GOOD)) is None


# --- as_: on behalf of an actor --------------------------------------------------------------


async def test_as_records_the_actor_and_keeps_the_tenant(queued: RecordingFacade) -> None:
    await order_job().as_(Actor(id="user-7", org_id=ORG), GOOD)
    [request] = queued.requests
    assert request.enqueued_by == "user-7"
    assert request.tenant_id == ORG


async def test_as_stamps_the_actors_org_on_a_job_that_belongs_to_no_tenant(
    queued: RecordingFacade,
) -> None:
    @job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"n:{i.n}", tenant="none")
    async def housekeeping(run: Run[Any]) -> None:
        return None

    await housekeeping.as_(Actor(id="user-7", org_id=ORG), {"n": 1})
    await housekeeping.as_(Actor(id="svc", kind="service"), {"n": 2})
    assert [r.tenant_id for r in queued.requests] == [ORG, None]
    assert [r.enqueued_by for r in queued.requests] == ["user-7", "svc"]


async def test_as_refuses_an_input_naming_another_org(queued: RecordingFacade) -> None:
    with pytest.raises(JobTenantMismatchError) as info:
        await order_job().as_(Actor(id="user-7", org_id=OTHER_ORG), GOOD)
    assert info.value.code == "X_JOB_TENANT_MISMATCH"
    assert queued.requests == []


async def test_as_for_an_actor_with_no_org_only_attributes(queued: RecordingFacade) -> None:
    await order_job().as_(Actor(id="svc", kind="service"), GOOD)
    assert queued.requests[0].enqueued_by == "svc"
    assert queued.requests[0].tenant_id == ORG


async def test_as_leaves_the_ambient_actor_as_it_was(queued: RecordingFacade) -> None:
    outer = Actor(id="outer", org_id=ORG)
    with acting_as(outer):
        await order_job().as_(Actor(id="inner", org_id=ORG), GOOD)
        assert order_job().request(GOOD).enqueued_by == "outer"


async def test_as_validates_input_before_anything_is_queued(queued: RecordingFacade) -> None:
    with pytest.raises(InputInvalidError):
        await order_job().as_(Actor(id="u", org_id=ORG), {"org_id": ORG})
    assert queued.requests == []


# --- describe and run ------------------------------------------------------------------------


def test_describe_is_the_manifest_row_and_is_json() -> None:
    described = order_job(timeout="1m", concurrency=2).describe()
    assert orjson.loads(orjson.dumps(described)) == described
    assert {k: described[k] for k in ("kind", "name", "queue", "tenant", "concurrency")} == {
        "kind": "job",
        "name": "place_order",
        "queue": "orders",
        "tenant": "input",
        "concurrency": 2,
    }
    assert described["description"] == "Place an order."
    assert described["retry"]["attempts"] == 4
    assert described["timeoutMs"] == 60_000
    schema = described["input"]
    assert schema["required"] == ["org_id", "items"]
    assert schema["properties"]["org_id"]["format"] == "uuid"
    assert schema["properties"]["items"]["items"]["required"] == ["id"]


async def test_run_drives_the_body_by_hand_with_the_workers_final_attempt() -> None:
    handle = order_job()
    attempt = 4
    run = Run(
        input=handle.parse_input(GOOD),
        step=None,  # type: ignore[arg-type]  # by hand, without a step API: the body takes no step
        ctx=None,
        attempt=attempt,
        final_attempt=is_final_attempt(handle.retry, attempt),
        job_id="job-1",
        run_id="run-1",
        signal=Signal(),
        progress=lambda *a: None,
    )
    assert run.final_attempt is True
    assert await handle.run(run) == "placed 1"


# --- a batch enqueue builds each request as enqueue builds one --------------------------------


async def test_enqueue_many_builds_each_request_as_request_builds_it(
    queued: RecordingFacade,
) -> None:
    handle = order_job()
    two = {"org_id": OTHER_ORG, "items": [{"id": "a"}, {"id": "b"}]}
    actor = Actor(id="token-1", org_id=None)
    trace = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with acting_as(actor), traced(trace):
        await handle.enqueue_many([GOOD, two], queue="bulk", priority=3, delay=60)
        single = [handle.request(v, queue="bulk", priority=3, delay=60) for v in (GOOD, two)]
    batch = queued.requests
    assert [dataclasses.replace(r, run_at_ms=0) for r in batch] == [
        dataclasses.replace(r, run_at_ms=0) for r in single
    ]
    assert [r.tenant_id for r in batch] == [ORG, OTHER_ORG]
    assert {(r.queue, r.priority, r.enqueued_by, r.traceparent) for r in batch} == {
        ("bulk", 3, "token-1", trace)
    }
    # delay: each request is due 60 s after its own clock read
    for request, built in zip(batch, single, strict=True):
        assert request.run_at_ms is not None
        assert built.run_at_ms is not None
        assert 0 <= built.run_at_ms - request.run_at_ms < 5_000


async def test_enqueue_many_reads_what_its_requests_share_once(
    queued: RecordingFacade, monkeypatch: pytest.MonkeyPatch
) -> None:
    import ujobs.jobs.request_fields as fields_module

    reads: list[int] = []

    def counted_traceparent() -> str | None:
        reads.append(1)
        return None

    monkeypatch.setattr(fields_module, "current_traceparent", counted_traceparent)
    inputs = [{"org_id": ORG, "items": [{"id": str(i)}] * (i + 1)} for i in range(50)]
    await order_job().enqueue_many(inputs)
    assert len(queued.requests) == 50
    assert len(reads) == 1  # the trace, the actor and the options: once per batch


async def test_enqueue_many_refuses_a_bad_option_at_its_first_input(
    queued: RecordingFacade,
) -> None:
    handle = order_job()
    assert await handle.enqueue_many([], queue="no spaces") == []  # nothing to refuse
    with pytest.raises(JobDeclarationInvalidError):
        await handle.enqueue_many([GOOD], queue="no spaces")
    with pytest.raises(InvariantError):
        await handle.enqueue_many([GOOD], debounce=0)
    assert queued.requests == []
