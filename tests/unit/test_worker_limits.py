"""Limits (§ Limits, § One run per key): per-process shedding, fleet slots, 'wait' and 'fail'
exactly per the tables, the unenforceable driver, and the claim round's burials."""

from __future__ import annotations

import builtins
from typing import Any

import pytest

from tests.support.worker import T0, Gate, declare, enqueue, frozen, make_worker, row, sample
from ujobs.clock import Clock, FrozenClock
from ujobs.drivers.base import ClaimedJob, ClaimOptions, EnqueueRequest, LeaseStore
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.drivers.memory.leases import MemoryLeaseStore
from ujobs.errors import ConcurrencyUnenforceableError
from ujobs.execution.run import Run, Settled
from ujobs.execution.settle import HAND_BACK_DELAY_MS
from ujobs.worker.concurrency import (
    job_cap_key,
    job_lease_key,
    lease_holder,
    own_earlier_claim,
    parse_holder,
)
from ujobs.worker.limits import LimitConfig

POLL = 250


def _keyed(when_busy: str) -> dict[str, Any]:
    return {"key": lambda i: i.account, "limit": 1, "when_busy": when_busy}


async def _claim_as(driver: MemoryDriver, worker_id: str) -> ClaimedJob:
    (claimed,) = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id=worker_id))
    return claimed


def test_lease_keys_and_holder_ids() -> None:
    assert job_cap_key("sync") == "job:sync"
    assert job_lease_key("billing:sync", "acct-1") == "job-key:billing%3Async:acct-1"
    assert job_lease_key("a", "b:c") != job_lease_key("a:b", "c")
    claimed = ClaimedJob(
        id="j#1@x", run_id="r", name="n", queue="q", input={}, tenant_id=None,
        idempotency_key="k", attempt=2, max_attempts=3, worker_id="host:1:ab@c", claim=7,
        run_at_ms=0, created_at_ms=0, lease_expires_at_ms=0,
    )  # fmt: skip
    holder = lease_holder(claimed)
    assert parse_holder(holder) == ("j#1@x", 7)
    assert not own_earlier_claim(holder, claimed)
    earlier = holder.replace("#7@", "#6@")
    assert own_earlier_claim(earlier, claimed)
    assert parse_holder("someone-else") is None


@pytest.mark.parametrize(
    ("limits", "cap"),
    [
        (LimitConfig(per_tenant=1), "per_tenant"),
        (LimitConfig(per_queue=1), "per_queue"),
        (LimitConfig(global_=1), "global"),
    ],
)
async def test_over_a_process_limit_the_claim_is_shed_without_burning_an_attempt(
    limits: LimitConfig, cap: str
) -> None:
    driver, clock = frozen()
    gate = Gate()
    handle = declare(gate, tenanted=True)
    first = await enqueue(driver, handle, 1, org="org-a")
    second = await enqueue(driver, handle, 2, org="org-a")
    worker = make_worker(driver, [handle], limits=limits)
    await worker.run_once()
    await gate.entered.wait()
    await _until_settled(worker, 1)
    shed = await row(driver, second)
    assert (shed.state, shed.attempt) == ("ready", 0)
    assert shed.run_at_ms == clock.now_ms() + HAND_BACK_DELAY_MS
    assert (await row(driver, first)).state == "running"
    assert worker.stats().shed == 1
    gate.open.set()
    await worker.join()


async def _until_settled(worker: Any, count: int) -> None:
    await worker.signals.wait("settled", lambda _: len(worker.signals.emitted("settled")) >= count)


async def test_a_plain_cap_holds_job_name_and_a_busy_run_waits_for_the_slot() -> None:
    driver, clock = frozen()
    gate = Gate()
    handle = declare(gate, concurrency=1)
    first = await enqueue(driver, handle, 1)
    second = await enqueue(driver, handle, 2)
    worker = make_worker(driver, [handle], poll_interval_ms=POLL)
    await worker.run_once()
    await _until_settled(worker, 1)
    waiting = await row(driver, second)
    assert (waiting.state, waiting.attempt, waiting.run_at_ms) == ("ready", 0, T0 + POLL)
    leases = driver.leases
    assert leases is not None
    (holder,) = await leases.holders(job_cap_key(handle.name))
    assert parse_holder(holder) == (first, 1)
    assert worker.stats().waited == 1
    gate.open.set()
    await worker.join()
    assert await leases.holders(job_cap_key(handle.name)) == []  # released at the end
    clock.advance(POLL)
    await worker.run_once()
    await worker.join()
    assert (await row(driver, second)).state == "done"


async def test_a_keyed_wait_waits_per_key_and_other_keys_run() -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate, concurrency=_keyed("wait"))
    await enqueue(driver, handle, 1, account="acct-1")
    same = await enqueue(driver, handle, 2, account="acct-1")
    other = await enqueue(driver, handle, 3, account="acct-2")
    worker = make_worker(driver, [handle])
    await worker.run_once()
    await _until_settled(worker, 1)
    assert (await row(driver, same)).state == "ready"
    assert (await row(driver, other)).state == "running"
    assert worker.stats().refused == 0
    gate.open.set()
    await worker.join()


async def test_fail_over_a_key_another_run_holds_is_refused() -> None:
    driver, _ = frozen()
    gate = Gate()
    told: list[Settled[Any]] = []

    async def hook(settled: Settled[Any]) -> None:
        told.append(settled)

    handle = declare(gate, concurrency=_keyed("fail"), on_settled=hook)
    await enqueue(driver, handle, 1, account="acct-1")
    busy = await enqueue(driver, handle, 2, account="acct-1")
    worker = make_worker(driver, [handle])
    await worker.run_once()
    await _until_settled(worker, 1)
    refused = await row(driver, busy)
    assert (refused.state, refused.attempt) == ("failed", 0)
    assert refused.last_error is not None
    assert "X_JOB_KEY_BUSY" in refused.last_error
    assert gate.started == [handle.parse_input({"n": 1, "account": "acct-1"})]
    assert worker.stats().refused == 1
    assert sample(worker.metrics, "jobs_total", queue="default", outcome="failed") == 1
    assert [(s.outcome, s.code) for s in told] == [("refused", "X_JOB_KEY_BUSY")]
    gate.open.set()
    await worker.join()


async def test_fail_never_refuses_a_run_over_its_own_earlier_claims_slot() -> None:
    driver, clock = frozen()
    handle = declare(Gate(), concurrency=_keyed("fail"), retry={"attempts": 3})
    job_id = await enqueue(driver, handle, 1, account="acct-1")
    earlier = await _claim_as(driver, "dead-worker")  # its worker died holding the slot
    leases = driver.leases
    assert leases is not None
    key = job_lease_key(handle.name, "acct-1")
    assert await leases.acquire(key, lease_holder(earlier), 1, 600_000)
    driver.state.rows[job_id].lease_expires_at_ms = clock.now_ms()  # backdated: it lapsed
    worker = make_worker(driver, [handle], poll_interval_ms=POLL)
    await worker.run_once()
    await _until_settled(worker, 1)
    r = await row(driver, job_id)
    assert (r.state, r.attempt, r.run_at_ms) == ("ready", 1, T0 + POLL)  # one poll, uncounted
    assert worker.stats().refused == 0
    assert worker.stats().waited == 1


class FreesAfterBusy(MemoryLeaseStore):
    """The other holder finishes between the failed acquire and the holders() read."""

    async def acquire(self, key: str, holder: str, limit: int, ttl_ms: int) -> bool:
        if await super().acquire(key, holder, limit, ttl_ms):
            return True
        for other in await self.holders(key):
            await self.release(key, other)
        return False


class RacingDriver(MemoryDriver):
    def __init__(self, clock: Clock) -> None:
        super().__init__(clock=clock)
        self.racing = FreesAfterBusy(clock)

    @property
    def leases(self) -> LeaseStore | None:
        return self.racing


async def test_fail_waits_one_poll_when_the_key_frees_a_moment_after_the_acquire() -> None:
    driver = RacingDriver(FrozenClock(T0))
    handle = declare(Gate(), concurrency=_keyed("fail"))
    job_id = await enqueue(driver, handle, 1, account="acct-1")
    key = job_lease_key(handle.name, "acct-1")
    assert await driver.racing.acquire(key, "another-run#1@w2", 1, 60_000)
    worker = make_worker(driver, [handle], poll_interval_ms=POLL)
    await worker.run_once()
    await _until_settled(worker, 1)
    r = await row(driver, job_id)
    assert (r.state, r.attempt) == ("ready", 0)
    assert worker.stats().refused == 0


async def test_a_key_that_throws_or_an_input_that_no_longer_parses_fails_the_attempt() -> None:
    driver, _ = frozen()
    ran: list[int] = []

    async def body(run: Run[Any]) -> None:
        ran.append(run.input.n)

    deployed = {"new_key": False}

    def key(i: Any) -> str:  # a deploy changed it: it throws for rows queued before
        if deployed["new_key"] and i.account == "boom":
            raise ValueError("no key for boom")
        return str(i.account)

    handle = declare(body, concurrency={"key": key, "limit": 1, "when_busy": "fail"})
    boom = await enqueue(driver, handle, 1, account="boom")
    fine = await enqueue(driver, handle, 2, account="acct-1")
    stale = (
        await driver.enqueue(
            EnqueueRequest(name=handle.name, input={"n": "three"}, idempotency_key="stale")
        )
    ).id
    deployed["new_key"] = True
    worker = make_worker(driver, [handle])
    await worker.run_once()
    await worker.join()
    assert ran == [2]
    assert (await row(driver, fine)).state == "done"
    for job_id, code in ((boom, "ValueError"), (stale, "X_JOB_INPUT_UNPARSEABLE")):
        r = await row(driver, job_id)
        assert (r.state, r.attempt) == ("ready", 1)  # the ordinary retry path: counted
        assert r.last_error is not None
        assert code in r.last_error


class LeaselessDriver(MemoryDriver):
    @property
    def leases(self) -> LeaseStore | None:
        return None


async def test_a_driver_without_leases_refuses_start_when_a_job_declares_concurrency() -> None:
    driver = LeaselessDriver(clock=FrozenClock(T0))
    capped = declare(Gate(), name="capped", concurrency=2)
    plain = declare(Gate(), name="plain")
    worker = make_worker(driver, [capped, plain])
    with pytest.raises(ConcurrencyUnenforceableError) as info:
        await worker.start()
    assert info.value.code == "X_JOB_CONCURRENCY_UNENFORCEABLE"
    assert info.value.meta["jobs"] == ["capped"]
    fine = make_worker(driver, [plain])
    await fine.start()
    await fine.stop()


async def test_the_claim_round_announces_the_rows_it_buried() -> None:
    driver, clock = frozen()
    told: builtins.list[tuple[str, str]] = []

    async def hook(settled: Settled[Any]) -> None:
        told.append((settled.name, settled.outcome))

    kept = declare(Gate(), name="kept", retry={"attempts": 1}, on_settled=hook)
    dropped = declare(
        Gate(), name="dropped", retry={"attempts": 1, "dead_letter": False}, on_settled=hook
    )
    ids = [await enqueue(driver, kept, 1), await enqueue(driver, dropped, 2)]
    for _ in ids:
        await _claim_as(driver, "dead-worker")
    for job_id in ids:
        driver.state.rows[job_id].lease_expires_at_ms = clock.now_ms()
    worker = make_worker(driver, [kept, dropped])
    result = await worker.run_once()
    assert result.claimed == 0
    assert [(await row(driver, i)).state for i in ids] == ["dead", "failed"]
    assert sorted(told) == [("dropped", "dropped"), ("kept", "dead-lettered")]
    assert sample(worker.metrics, "jobs_total", queue="default", outcome="dead") == 1
    assert sample(worker.metrics, "jobs_total", queue="default", outcome="failed") == 1


async def test_rate_per_tenant_sheds_past_its_rate_until_the_tenants_next_token() -> None:
    """``rate_per_tenant=Rate(2, "1s")``: a tenant's third start within the window is shed
    (uncounted) and due when its bucket has a token again; another tenant has its own bucket."""
    from ujobs.worker.limits import Rate

    driver, clock = frozen()
    gate = Gate()
    gate.open.set()  # bodies return at once: only the rate holds starts back
    handle = declare(gate, tenanted=True)
    a = [await enqueue(driver, handle, n, org="org-a") for n in range(3)]
    b = await enqueue(driver, handle, 9, org="org-b")
    worker = make_worker(driver, [handle], limits=LimitConfig(rate_per_tenant=Rate(2, "1s")))
    await worker.run_once()
    await worker.join()
    states = {job: (await row(driver, job)).state for job in [*a, b]}
    assert sorted(states[j] for j in a) == ["done", "done", "ready"]
    assert states[b] == "done"
    [shed] = [j for j in a if states[j] == "ready"]
    held_back = await row(driver, shed)
    # Two tokens spent at one instant: the next one is half a window away.
    assert (held_back.attempt, held_back.run_at_ms) == (0, clock.now_ms() + 500)
    assert worker.stats().shed == 1
    clock.advance(500)
    await worker.run_once()
    await worker.join()
    assert (await row(driver, shed)).state == "done"
