"""Debounce and per-period uniqueness on the idempotency key (``EnqueueRequest.debounce_ms``,
``unique_for_ms``), on every driver, with the frozen clock: a debounced enqueue moves a run
that has not started (its start and its input) instead of answering deduped; a started run is
deduped as without it; a key whose run completed within ``unique_for`` still dedupes, after it
a new run is made; many concurrent enqueues of one key make one run."""

from __future__ import annotations

import asyncio

from tests.support.conformance import claim, claim_one, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import JobDriver, NackOptions

DEBOUNCE_MS = 5_000
HOUR_MS = 3_600_000


async def test_a_debounce_moves_the_waiting_run_and_takes_the_newer_input(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS))
    assert (first.deduped, first.debounced) == (False, False)
    # The first run waits out the debounce too: nothing is due yet.
    assert await claim(driver) == []
    clock.advance(DEBOUNCE_MS - 1)
    second = await driver.enqueue(req(key="k", input={"v": 2}, debounce_ms=DEBOUNCE_MS))
    assert (second.id, second.run_id) == (first.id, first.run_id)
    assert (second.deduped, second.debounced) == (True, True)
    clock.advance(DEBOUNCE_MS - 1)  # past the first due time, short of the moved one
    assert await claim(driver) == []
    clock.advance(1)
    job = await claim_one(driver)
    assert (job.id, job.input, job.run_at_ms) == (first.id, {"v": 2}, clock.now_ms())


async def test_a_debounce_older_than_the_one_the_run_took_moves_nothing(
    driver: JobDriver, clock: FrozenClock
) -> None:
    """``debounce_seq`` (a stream message's sequence): a message delivered again after a newer
    one of its key is answered deduped and leaves the newer input and start in place."""
    first = await driver.enqueue(
        req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS, debounce_seq=1)
    )
    second = await driver.enqueue(
        req(key="k", input={"v": 2}, debounce_ms=DEBOUNCE_MS, debounce_seq=2)
    )
    assert (second.id, second.deduped, second.debounced) == (first.id, True, True)
    clock.advance(1_000)
    for stale in (1, 2):  # older, and the same message again
        again = await driver.enqueue(
            req(key="k", input={"v": stale}, debounce_ms=DEBOUNCE_MS, debounce_seq=stale)
        )
        assert (again.id, again.deduped, again.debounced) == (first.id, True, False)
    clock.advance(DEBOUNCE_MS - 1_000)  # the second message's due time: not moved since
    job = await claim_one(driver)
    assert (job.id, job.input) == (first.id, {"v": 2})


async def test_a_debounce_without_a_seq_always_moves_and_keeps_the_highest_seq(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(
        req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS, debounce_seq=5)
    )
    plain = await driver.enqueue(req(key="k", input={"v": 2}, debounce_ms=DEBOUNCE_MS))
    assert (plain.id, plain.debounced) == (first.id, True)
    stale = await driver.enqueue(
        req(key="k", input={"v": 3}, debounce_ms=DEBOUNCE_MS, debounce_seq=4)
    )
    assert (stale.id, stale.debounced) == (first.id, False)
    newer = await driver.enqueue(
        req(key="k", input={"v": 4}, debounce_ms=DEBOUNCE_MS, debounce_seq=6)
    )
    assert (newer.id, newer.debounced) == (first.id, True)
    clock.advance(DEBOUNCE_MS)
    assert (await claim_one(driver)).input == {"v": 4}


async def test_a_plain_enqueue_of_a_waiting_debounced_key_only_dedupes(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS))
    plain = await driver.enqueue(req(key="k", input={"v": 2}))
    assert (plain.id, plain.deduped, plain.debounced) == (first.id, True, False)
    clock.advance(DEBOUNCE_MS)
    assert (await claim_one(driver)).input == {"v": 1}


async def test_a_running_key_is_deduped_not_debounced(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS))
    clock.advance(DEBOUNCE_MS)
    running = await claim_one(driver)
    again = await driver.enqueue(req(key="k", input={"v": 2}, debounce_ms=DEBOUNCE_MS))
    assert (again.id, again.deduped, again.debounced) == (first.id, True, False)
    # Once it is done, the key is free: a new run, waiting out its own debounce.
    assert await driver.ack(running.id, running.ref)
    after = await driver.enqueue(req(key="k", input={"v": 3}, debounce_ms=DEBOUNCE_MS))
    assert (after.deduped, after.debounced) == (False, False)
    assert after.id != first.id


async def test_a_run_waiting_for_its_retry_is_not_debounced(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", input={"v": 1}, debounce_ms=DEBOUNCE_MS))
    clock.advance(DEBOUNCE_MS)
    job = await claim_one(driver)
    due = clock.now_ms() + 1_000
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_A: later", run_at_ms=due))
    again = await driver.enqueue(req(key="k", input={"v": 2}, debounce_ms=DEBOUNCE_MS))
    assert (again.id, again.deduped, again.debounced) == (first.id, True, False)
    clock.advance(1_000)
    assert (await claim_one(driver)).input == {"v": 1}


async def test_unique_for_dedupes_within_the_period_and_not_after(
    driver: JobDriver, clock: FrozenClock
) -> None:
    first = await driver.enqueue(req(key="k", unique_for_ms=HOUR_MS))
    job = await claim_one(driver)
    assert await driver.ack(job.id, job.ref)
    done_at = clock.now_ms()
    clock.advance(HOUR_MS - 1)
    within = await driver.enqueue(req(key="k", unique_for_ms=HOUR_MS))
    assert (within.id, within.run_id, within.deduped) == (first.id, first.run_id, True)
    assert await claim(driver) == []
    clock.set(done_at + HOUR_MS)
    after = await driver.enqueue(req(key="k", unique_for_ms=HOUR_MS))
    assert after.deduped is False
    assert after.id != first.id
    assert (await claim_one(driver)).id == after.id


async def test_unique_for_holds_only_done_runs_and_only_its_own_key(
    driver: JobDriver, clock: FrozenClock
) -> None:
    await driver.enqueue(req(key="failing", max_attempts=1, unique_for_ms=HOUR_MS))
    job = await claim_one(driver)
    assert await driver.nack(job.id, job.ref, NackOptions(error="X_A: no", dead_letter=True))
    again = await driver.enqueue(req(key="failing", unique_for_ms=HOUR_MS))
    assert again.deduped is False  # a dead run holds nothing
    # A run enqueued without unique_for holds its key only while live.
    plain = await driver.enqueue(req(key="plain"))
    jobs = await claim(driver)
    for claimed in jobs:
        assert await driver.ack(claimed.id, claimed.ref)
    assert plain.id in {c.id for c in jobs}
    assert (await driver.enqueue(req(key="plain", unique_for_ms=HOUR_MS))).deduped is False
    # Another tenant's done run is not this tenant's.
    await driver.enqueue(req(key="t", tenant_id="org-a", unique_for_ms=HOUR_MS))
    for claimed in await claim(driver):
        assert await driver.ack(claimed.id, claimed.ref)
    other = await driver.enqueue(req(key="t", tenant_id="org-b", unique_for_ms=HOUR_MS))
    assert other.deduped is False
    same = await driver.enqueue(req(key="t", tenant_id="org-a", unique_for_ms=HOUR_MS))
    assert same.deduped is True


async def test_a_debounce_is_per_tenant(driver: JobDriver, clock: FrozenClock) -> None:
    a = await driver.enqueue(req(key="k", tenant_id="org-a", debounce_ms=DEBOUNCE_MS))
    b = await driver.enqueue(req(key="k", tenant_id="org-b", debounce_ms=DEBOUNCE_MS))
    assert a.id != b.id
    assert (b.deduped, b.debounced) == (False, False)
    again = await driver.enqueue(req(key="k", tenant_id="org-b", debounce_ms=DEBOUNCE_MS))
    assert (again.id, again.debounced) == (b.id, True)


async def test_concurrent_enqueues_of_one_key_make_one_run(
    driver: JobDriver, clock: FrozenClock
) -> None:
    debounced = await asyncio.gather(
        *(
            driver.enqueue(req(key="burst", input={"v": n}, debounce_ms=DEBOUNCE_MS))
            for n in range(40)
        )
    )
    assert len({a.id for a in debounced}) == 1
    assert sum(not a.deduped for a in debounced) == 1
    unique = await asyncio.gather(
        *(driver.enqueue(req(key="u", unique_for_ms=HOUR_MS)) for _ in range(40))
    )
    assert len({a.id for a in unique}) == 1
    clock.advance(DEBOUNCE_MS)
    jobs = await claim(driver, limit=100)
    assert sorted(j.idempotency_key for j in jobs) == ["burst", "u"]


async def test_a_batch_debounces_and_dedupes_like_single_enqueues(
    driver: JobDriver, clock: FrozenClock
) -> None:
    answers = await driver.enqueue_many(
        [
            req(key="b", input={"v": 1}, debounce_ms=DEBOUNCE_MS),
            req(key="b", input={"v": 2}, debounce_ms=DEBOUNCE_MS),
            req(key="c", input={"v": 3}, debounce_ms=DEBOUNCE_MS),
        ]
    )
    assert answers[0].id == answers[1].id
    assert [(a.deduped, a.debounced) for a in answers] == [
        (False, False),
        (True, True),
        (False, False),
    ]
    clock.advance(DEBOUNCE_MS)
    got = {j.idempotency_key: j.input for j in await claim(driver)}
    assert got == {"b": {"v": 2}, "c": {"v": 3}}
