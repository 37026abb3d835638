"""Enqueue: ids, the one-live-run key, and enqueue_many."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.support.conformance import claim, claim_one, make_in_state, queue_stats, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import EnqueueRequest, JobDriver, JobIntrospection, JobState, NackOptions
from ujobs.errors import InvariantError
from ujobs.ids import new_id


async def test_enqueue_mints_uuid_ids(driver: JobDriver) -> None:
    enq = await driver.enqueue(req())
    assert not enq.deduped
    assert enq.id != enq.run_id
    assert uuid.UUID(enq.id).version == 7
    assert uuid.UUID(enq.run_id).version == 7


async def test_enqueue_keeps_given_ids(driver: JobDriver) -> None:
    job_id, run_id = new_id(), new_id()
    enq = await driver.enqueue(req(id=job_id, run_id=run_id))
    assert (enq.id, enq.run_id, enq.deduped) == (job_id, run_id, False)
    job = await claim_one(driver)
    assert (job.id, job.run_id) == (job_id, run_id)


async def test_claimed_job_carries_what_was_enqueued(driver: JobDriver, clock: FrozenClock) -> None:
    payload = {"org": "o1", "rows": [1, 2, {"x": None}], "ok": True, "ratio": 0.5}
    enq = await driver.enqueue(
        req(
            "sync",
            key="sync:o1",
            queue="q1",
            tenant_id="t1",
            input=payload,
            max_attempts=7,
            traceparent="00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
            enqueued_by="actor:1",
        )
    )
    job = await claim_one(driver, "q1")
    assert job.id == enq.id
    assert job.run_id == enq.run_id
    assert job.name == "sync"
    assert job.queue == "q1"
    assert job.input == payload
    assert job.tenant_id == "t1"
    assert job.idempotency_key == "sync:o1"
    assert job.max_attempts == 7
    assert job.attempt == 1
    assert job.traceparent == "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    assert job.enqueued_by == "actor:1"
    assert job.created_at_ms == clock.now_ms()
    assert job.run_at_ms == clock.now_ms()


async def test_a_live_key_dedupes(driver: JobDriver) -> None:
    first = await driver.enqueue(req(key="k", tenant_id="t1"))
    again = await driver.enqueue(req(key="k", tenant_id="t1", input={"other": 2}))
    assert again.deduped
    assert (again.id, again.run_id) == (first.id, first.run_id)
    assert (await queue_stats(driver)).ready == 1
    job = await claim_one(driver)
    assert job.input == {"n": 1}, "the first enqueue's input stands"


async def test_a_fresh_id_meeting_a_live_key_answers_the_live_row(driver: JobDriver) -> None:
    first = await driver.enqueue(req(key="k"))
    again = await driver.enqueue(req(key="k", id=new_id(), run_id=new_id()))
    assert again.deduped
    assert (again.id, again.run_id) == (first.id, first.run_id)


@pytest.mark.parametrize("state", ["delayed", "running", "suspended"])
async def test_every_live_state_holds_its_key(
    driver: JobDriver, clock: FrozenClock, state: JobState
) -> None:
    if state == "delayed":
        first = await driver.enqueue(req(key="k", run_at_ms=clock.now_ms() + 60_000))
    else:
        first_id = await make_in_state(driver, state, req(key="k"))
        first = await driver.enqueue(req(key="k"))
        assert first.id == first_id
    again = await driver.enqueue(req(key="k"))
    assert again.deduped
    assert again.id == first.id


@pytest.mark.parametrize("state", ["done", "dead", "failed"])
async def test_a_finished_row_does_not_dedupe(driver: JobDriver, state: JobState) -> None:
    old = await make_in_state(driver, state, req(key="k"))
    fresh = await driver.enqueue(req(key="k"))
    assert not fresh.deduped
    assert fresh.id != old
    job = await claim_one(driver)
    assert job.id == fresh.id


async def test_a_cancelled_row_does_not_dedupe(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    old = await make_in_state(driver, "cancelled", req(key="k"), introspect=introspect)
    fresh = await driver.enqueue(req(key="k"))
    assert not fresh.deduped
    assert fresh.id != old


async def test_keys_are_scoped_by_name_and_tenant(driver: JobDriver) -> None:
    answers = [
        await driver.enqueue(req("a", key="k", tenant_id="t1")),
        await driver.enqueue(req("a", key="k", tenant_id="t2")),
        await driver.enqueue(req("a", key="k", tenant_id=None)),
        await driver.enqueue(req("b", key="k", tenant_id="t1")),
    ]
    assert not any(a.deduped for a in answers)
    assert len({a.id for a in answers}) == 4
    assert (await driver.enqueue(req("a", key="k", tenant_id=None))).id == answers[2].id
    assert (await driver.enqueue(req("b", key="k", tenant_id="t1"))).id == answers[3].id
    assert (await queue_stats(driver)).ready == 4


async def test_an_id_naming_a_live_row_inserts_nothing(driver: JobDriver) -> None:
    first = await driver.enqueue(req(key="k1"))
    again = await driver.enqueue(req("other-job", key="k2", id=first.id, run_id=new_id()))
    assert again.deduped
    assert (again.id, again.run_id) == (first.id, first.run_id)
    assert (await queue_stats(driver)).ready == 1


async def test_an_id_naming_a_finished_row_inserts_nothing(driver: JobDriver) -> None:
    done_id = await make_in_state(driver, "done", req(key="k1"))
    again = await driver.enqueue(req(key="k1", id=done_id))
    assert again.deduped
    assert again.id == done_id
    stats = await queue_stats(driver)
    assert (stats.ready, stats.done) == (0, 1)
    assert await claim(driver) == []


async def test_enqueue_many_mixes_new_and_deduped(driver: JobDriver) -> None:
    live = await driver.enqueue(req(key="held"))
    finished = await make_in_state(driver, "dead", req(key="gone", queue="other"))
    shared_id = new_id()
    answers = await driver.enqueue_many(
        [
            req(key="held"),  # a live key
            req(key="new-1"),
            req(key="twice"),
            req(key="twice"),  # the same key twice in one batch
            req(key="x1", id=shared_id),
            req(key="x2", id=shared_id),  # the same id twice in one batch
            req(key="y", id=finished),  # an id naming a finished row
            req(key="gone"),  # a finished row's key
        ]
    )
    assert [a.deduped for a in answers] == [True, False, False, True, False, True, True, False]
    assert answers[0].id == live.id
    assert answers[3].id == answers[2].id
    assert answers[4].id == shared_id
    assert answers[5].id == shared_id
    assert answers[6].id == finished
    assert answers[7].id != finished
    assert len({a.id for a in answers}) == 6
    assert (await queue_stats(driver)).ready == 5


async def test_enqueue_many_of_nothing(driver: JobDriver) -> None:
    assert await driver.enqueue_many([]) == []


async def test_a_key_frees_when_the_row_settles_then_holds_again(driver: JobDriver) -> None:
    await driver.enqueue(req(key="k"))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="x", fail=True))
    second = await driver.enqueue(req(key="k"))
    assert not second.deduped
    third = await driver.enqueue(req(key="k"))
    assert third.deduped
    assert third.id == second.id


@pytest.mark.parametrize("max_attempts", [0, -1])
async def test_an_enqueue_without_attempts_is_refused(driver: JobDriver, max_attempts: int) -> None:
    with pytest.raises(InvariantError) as caught:
        await driver.enqueue(req(max_attempts=max_attempts))
    assert caught.value.code == "X_INVARIANT"
    assert (await queue_stats(driver)).ready == 0


async def test_a_bad_request_in_a_batch_inserts_nothing(driver: JobDriver) -> None:
    with pytest.raises(InvariantError):
        await driver.enqueue_many([req(), req(max_attempts=0), req()])
    assert (await queue_stats(driver)).ready == 0


async def test_enqueue_many_reads_any_iterable_once_in_order(driver: JobDriver) -> None:
    """A generator is a batch too (the Postgres driver builds each request as its COPY goes
    out): every request is read once, answered in order, repeats deduped as in a list."""
    read: list[int] = []

    def requests() -> Iterator[EnqueueRequest]:
        for i in range(150):
            read.append(i)
            yield req(key=f"gen-{i % 140}")  # the last ten repeat keys of the batch

    answers = await driver.enqueue_many(requests())
    assert read == list(range(150))
    assert [a.deduped for a in answers] == [False] * 140 + [True] * 10
    assert [a.id for a in answers[140:]] == [a.id for a in answers[:10]]
    assert (await queue_stats(driver)).ready == 140
    assert await driver.enqueue_many(iter(())) == []


async def test_a_batch_whose_iterable_fails_late_inserts_nothing(driver: JobDriver) -> None:
    """A bad request or the iterable raising after more than a hundred good requests: that
    error is raised and none of the batch is inserted."""

    def refused_at(n: int) -> Iterator[EnqueueRequest]:
        for i in range(n):
            yield req(key=f"late-{i}")
        yield req(max_attempts=0)

    def raising_at(n: int) -> Iterator[EnqueueRequest]:
        for i in range(n):
            yield req(key=f"boom-{i}")
        raise LookupError("the caller's source failed")

    with pytest.raises(InvariantError):
        await driver.enqueue_many(refused_at(130))
    with pytest.raises(LookupError):
        await driver.enqueue_many(raising_at(130))
    with pytest.raises(LookupError):
        await driver.enqueue_many(raising_at(0))
    assert (await queue_stats(driver)).ready == 0
    answers = await driver.enqueue_many([req(key="late-0"), req(key="boom-0")])
    assert [a.deduped for a in answers] == [False, False]  # nothing of the failed batches holds
