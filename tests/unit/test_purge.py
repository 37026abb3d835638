"""``purge()``: a sweep is a job — one step per target, one clock reading per pass, a duplicate
target refused before the first delete (SEED § Retention sweeps are jobs too)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from tests.support.execute import T0, attempt, enqueue, frozen_driver
from ujobs.errors import InvariantError
from ujobs.events.bus import EVENTS_PURGE_TARGET, MemoryEventBus, events_purge_target
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.registry import Registry, define_api
from ujobs.retention import DEFAULT_PURGE_CRON, purge
from ujobs.retention.builtin import BUILTIN_PURGE, register_builtin_purge


@dataclass
class Table:
    """A structural target: a plain object with a name and ``purge_expired``."""

    name: str
    answer: int = 0
    fail_times: int = 0
    calls: list[int] = field(default_factory=list)

    async def purge_expired(self, now_ms: int) -> int:
        self.calls.append(now_ms)
        if self.fail_times:
            self.fail_times -= 1
            raise RuntimeError(f"{self.name} is away")
        return self.answer


async def test_one_step_per_target_and_a_killed_attempt_resumes_at_the_table_it_stopped_on() -> (
    None
):
    driver, clock = frozen_driver()
    set_job_driver(driver)
    first, second = Table("first", answer=3), Table("second", answer=2, fail_times=1)
    sweep = purge(name="sweep", targets=[first, second], cron=None)
    await enqueue(driver, sweep.job)
    failed = await attempt(driver, sweep.job)
    assert failed.outcome == "retried"
    assert (first.calls, second.calls) == ([T0], [T0])

    clock.advance(3_600_000)  # the retry is due, an hour later
    done = await attempt(driver, sweep.job)
    assert done.outcome == "completed"
    assert first.calls == [T0]  # its step replayed from storage: no second delete
    # One clock reading per PASS: the retry sweeps against the instant the pass began.
    assert second.calls == [T0, T0]
    assert done.result == {"nowMs": T0, "removed": {"first": 3, "second": 2}, "total": 5}
    steps = [s.name for s in await driver.load_steps(done.run_id, tenant_id=None)]
    assert steps == ["clock", "first", "second"]


async def test_every_target_of_a_pass_gets_the_same_reading_of_the_clock() -> None:
    driver, clock = frozen_driver()
    set_job_driver(driver)

    class Slow(Table):
        async def purge_expired(self, now_ms: int) -> int:
            clock.advance(60_000)  # a slow delete: the clock moves on, the pass's reading not
            return await super().purge_expired(now_ms)

    targets = [Slow("a"), Slow("b"), Slow("c")]
    sweep = purge(name="sweep", targets=lambda: targets, cron=None)
    await enqueue(driver, sweep.job)
    assert (await attempt(driver, sweep.job)).outcome == "completed"
    assert [t.calls for t in targets] == [[T0], [T0], [T0]]


async def test_two_targets_under_one_name_are_refused_before_the_first_delete() -> None:
    with pytest.raises(InvariantError) as declared:
        purge(name="sweep", targets=[Table("x"), Table("x")])
    assert declared.value.code == "X_INVARIANT"

    driver, _ = frozen_driver()
    set_job_driver(driver)
    first, again = Table("x_rate_limit", answer=9), Table("x_rate_limit")
    late = purge(name="late", targets=lambda: [first, again], cron=None)
    await enqueue(driver, late.job)
    execution = await attempt(driver, late.job)
    assert execution.outcome == "retried"
    assert execution.code == "X_INVARIANT"
    assert first.calls == []  # nothing was deleted


async def test_targets_are_read_once_per_attempt_never_captured() -> None:
    driver, _ = frozen_driver()
    set_job_driver(driver)
    built: list[Table] = []

    def targets() -> list[Table]:
        built.append(Table("later"))  # a store the host builds after declaring the sweep
        return built[-1:]

    sweep = purge(name="sweep", targets=targets, cron=None)
    assert built == []
    await enqueue(driver, sweep.job)
    assert (await attempt(driver, sweep.job)).outcome == "completed"
    assert len(built) == 1
    assert built[0].calls == [T0]


async def test_a_target_answering_no_row_count_fails_the_pass() -> None:
    driver, _ = frozen_driver()
    set_job_driver(driver)

    class Liar(Table):
        async def purge_expired(self, now_ms: int) -> int:
            return -1

    sweep = purge(name="sweep", targets=[Liar("x")], cron=None)
    await enqueue(driver, sweep.job)
    assert (await attempt(driver, sweep.job)).code == "X_INVARIANT"


async def test_a_replayed_delete_is_safe_and_answers_what_is_left() -> None:
    bus = MemoryEventBus()
    target = events_purge_target(bus)
    assert target.name == EVENTS_PURGE_TARGET
    sweep = purge(name="sweep", targets=[target], cron=None)
    assert (await sweep.run_once()) == {EVENTS_PURGE_TARGET: 0}
    assert (await sweep.run_once()) == {EVENTS_PURGE_TARGET: 0}


def test_the_cron_task_enqueues_the_sweep_hourly_by_default() -> None:
    sweep = purge(name="sweep", targets=[Table("t")])
    assert DEFAULT_PURGE_CRON == "0 * * * *"
    assert sweep.task is not None
    assert (sweep.task.name, sweep.task.cron, sweep.task.tz) == ("sweep.cron", "0 * * * *", "UTC")
    assert sweep.task.entries(0) == [(sweep.job, {})]
    assert purge(name="quiet", targets=[], cron=None).task is None
    # A sweep is a job: its name is its durable key, and re-enqueueing a live sweep dedupes.
    assert sweep.job.request({}).idempotency_key == "sweep"
    assert sweep.job.request({}).tenant_id is None


def test_define_api_registers_the_sweep_through_its_task() -> None:
    import types

    module = types.ModuleType("sweeps")
    module.hourly = purge(name="sweep", targets=[Table("t")]).task  # type: ignore[attr-defined]
    api = define_api(tasks=[module], install=False)
    assert set(api.tasks) == {"sweep.cron"}
    assert set(api.jobs) == {"sweep"}


def test_the_services_register_x_purge_with_a_small_function() -> None:
    registry = Registry()
    family = register_builtin_purge(registry, pool=None, cron="* * * * *")
    assert family.name == BUILTIN_PURGE == "x.purge"
    assert registry.jobs == {"x.purge": family.job}
    assert family.task is not None
    assert registry.tasks == {"x.purge.cron": family.task}
    assert family.task.cron == "* * * * *"
    again = Registry()
    register_builtin_purge(again, pool=None, cron=None)
    assert again.jobs == {"x.purge": family.job}
    assert again.tasks == {}
