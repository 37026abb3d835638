"""``backfill()``: a pass over every row a source matches, as a job (SEED § Backfills are jobs,
§ The throttle, § The x_backfills ledger)."""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import inspect
import logging
import math
import time
import types
from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.execute import T0, attempt, claim, enqueue, frozen_driver, records
from tests.unit.backfill_kit import Table, Writer
from ujobs.backfill import DEFAULT_BACKFILL_RATE, Throttle, backfill, configure_backfills
from ujobs.backfill.settings import reset_backfill_settings
from ujobs.backfill.source import CATCH_UP_S
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import JobDeclarationInvalidError, JobTenantRequiredError
from ujobs.execution.attempt import execute_job
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.job import JobHandle
from ujobs.signal import Signal
from ujobs.worker.drain import drain_reason


@pytest.fixture(autouse=True)
def _settings() -> Iterator[None]:
    reset_backfill_settings()
    yield
    reset_backfill_settings()


def declare(table: Table, writer: Writer, **options: Any) -> JobHandle[Any]:
    options.setdefault("batch", 3)
    options.setdefault("rate", 1_000)
    options.setdefault("tenant", "none")
    return backfill(name="rewrite-slugs", source=table.source, handle=writer, **options)


def installed() -> tuple[MemoryDriver, Any]:
    driver, clock = frozen_driver()
    set_job_driver(driver)
    return driver, clock


async def ledger_rows(driver: MemoryDriver) -> list[Any]:
    ledger = driver.backfills
    assert ledger is not None
    return await ledger.list()


# --- Backfills are jobs ------------------------------------------------------------------------


async def test_one_step_per_page_checkpointing_a_cursor_and_a_count_never_the_rows() -> None:
    driver, _ = installed()
    table, writer = Table(7), Writer(Table(0))
    writer.table = table
    rewrite = declare(table, writer)
    await enqueue(driver, rewrite)
    done = await attempt(driver, rewrite)
    assert done.outcome == "completed"
    assert done.result == {
        "name": "rewrite-slugs",
        "batches": 3,
        "rows": 7,
        "skipped": False,
        "runId": done.run_id,
    }
    steps = await driver.load_steps(done.run_id, tenant_id=None)
    assert [s.name for s in steps] == ["batch:0", "batch:1", "batch:2"]
    assert [s.output for s in steps] == [
        {"cursor": 3, "rows": 3, "n": 3, "done": False},
        {"cursor": 6, "rows": 6, "n": 3, "done": False},
        {"cursor": 7, "rows": 7, "n": 1, "done": True},
    ]
    assert table.pages == [None, 3, 6]  # keyset: each page after the last cursor
    assert table.unslugged() == 0


async def test_handle_is_given_the_rows_and_a_signal_and_no_step() -> None:
    driver, _ = installed()
    table = Table(2)
    writer = Writer(table)
    rewrite = declare(table, writer)
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "completed"
    assert writer.calls == [[1, 2]]
    assert all(isinstance(s, Signal) for s in writer.signals)


async def test_a_killed_pass_resumes_on_its_page_and_handle_runs_at_least_once_per_page() -> None:
    driver, clock = installed()
    table = Table(7)
    writer = Writer(table, fail_on_call=2)  # page 2 fails after batch:0 was checkpointed
    rewrite = declare(table, writer)
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "retried"
    clock.advance(3_600_000)
    done = await attempt(driver, rewrite)
    assert done.outcome == "completed"
    # batch:0 replayed from storage (no statement); the failed page ran again from its cursor.
    assert table.pages == [None, 3, 3, 6]
    assert writer.calls == [[1, 2, 3], [4, 5, 6], [4, 5, 6], [7]]
    assert done.result["rows"] == 7


async def test_the_idempotency_key_is_the_name_so_a_live_pass_is_not_doubled() -> None:
    driver, _ = installed()
    table = Table(1)
    rewrite = declare(table, Writer(table))
    first = await driver.enqueue(rewrite.request({}))
    again = await driver.enqueue(rewrite.request({}))
    assert again.deduped
    assert again.id == first.id
    assert rewrite.request({}).idempotency_key == "rewrite-slugs"


async def test_tenant_is_required_and_none_opens_the_cross_tenant_scope_for_the_pass() -> None:
    table = Table(4)
    with pytest.raises(TypeError):
        backfill(name="x", source=table.source, handle=Writer(table))  # type: ignore[call-arg]
    with pytest.raises(JobTenantRequiredError):
        backfill(name="x", source=table.source, handle=Writer(table), tenant=None)  # type: ignore[arg-type]
    driver, _ = installed()
    rewrite = declare(table, Writer(table))
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "completed"
    assert table.scopes == ["backfill rewrite-slugs sweeps every tenant"] * 2


@pytest.mark.parametrize("batch", [0, -1, 1.5, math.nan, True, "10"])
def test_a_bad_batch_is_refused_at_declaration(batch: Any) -> None:
    table = Table(0)
    with pytest.raises(JobDeclarationInvalidError) as refused:
        declare(table, Writer(table), batch=batch)
    assert refused.value.meta["field"] == "batch"


@pytest.mark.parametrize("rate", [0, -5, math.nan, math.inf, None, True, "5"])
def test_a_rate_that_is_not_finite_and_positive_is_refused_where_written(rate: Any) -> None:
    table = Table(0)
    with pytest.raises(JobDeclarationInvalidError) as refused:
        declare(table, Writer(table), rate=rate)
    assert refused.value.meta["field"] == "rate"


def test_the_default_rate_is_five_batches_a_second_and_fractions_are_rates() -> None:
    assert DEFAULT_BACKFILL_RATE == 5
    table = Table(0)
    default = backfill(name="d", source=table.source, handle=Writer(table), tenant="none")
    assert "5/s" in (default.definition.description or "")
    assert Throttle(0.5).interval == 2.0
    declare(table, Writer(table), rate=0.5)


async def test_the_throttle_spaces_batch_starts_and_a_slow_batch_pays_no_wait() -> None:
    """Starts ``1 / rate`` apart; a late batch starts at once, keeping a schedule at most
    ``CATCH_UP_S`` or one interval (here: one interval) behind, so an occasional slow batch does
    not lower the average and at the default rate a long stall buys one catch-up batch."""
    now = [100.0]
    slept: list[float] = []
    throttle = Throttle(4, monotonic=lambda: now[0])  # one batch every 250 ms
    signal = Signal()
    await throttle.wait(signal)  # the first batch of an attempt starts at once
    assert throttle.waits == 0
    now[0] += 0.3  # a batch slower than the interval: the next starts at once ...
    await throttle.wait(signal)
    assert throttle.waits == 0
    began = time.monotonic()
    now[0] += 0.05  # ... on the schedule (due at 100.25, so the next at 100.5), not shifted
    await throttle.wait(signal)
    slept.append(time.monotonic() - began)
    assert throttle.waits == 1
    assert slept[0] >= 0.14
    now[0] = 102.5  # far behind: it catches up at most one interval, then paces again
    await throttle.wait(signal)
    now[0] += 0.01
    await throttle.wait(signal)
    assert throttle.waits == 1
    began = time.monotonic()
    await throttle.wait(signal)
    assert throttle.waits == 2
    assert time.monotonic() - began >= 0.2


async def test_after_a_stall_the_throttle_catches_up_its_schedule_up_to_its_bound() -> None:
    """At a fast rate a stall of the machine shorter than ``CATCH_UP_S`` costs the average
    nothing (the batches after it start at once until the schedule is met); of a longer one
    only ``CATCH_UP_S`` is caught up, then it paces again."""
    now = [100.0]
    throttle = Throttle(128, monotonic=lambda: now[0])  # every 1/128 s (exact in binary)
    signal = Signal()

    async def unpaced_batches() -> int:
        """Batches that start at once (the clock does not move) until one has to wait."""
        count, waits = 0, throttle.waits
        while throttle.waits == waits:
            await throttle.wait(signal)
            count += 1
        return count - 1

    await throttle.wait(signal)
    now[0] += 20 / 128  # a 156 ms stall: 20 batches behind, all caught up
    assert await unpaced_batches() == 20
    assert CATCH_UP_S == 0.25
    now[0] += 2.0  # a 2 s stall: only its last 250 ms (32 intervals) is caught up
    assert await unpaced_batches() == 32 + 1  # those, and the batch due now


async def test_the_throttle_wait_unwinds_on_the_runs_abort_with_x_aborted() -> None:
    throttle = Throttle(0.01)  # one batch every 100 s
    signal = Signal()
    await throttle.wait(signal)
    asyncio.get_running_loop().call_later(0.05, signal.abort)
    began = time.monotonic()
    with pytest.raises(Exception) as aborted:
        await throttle.wait(signal)
    assert getattr(aborted.value, "code", None) == "X_ABORTED"
    assert time.monotonic() - began < 5


async def test_the_pause_is_spent_inside_the_step_so_replayed_checkpoints_pay_none() -> None:
    driver, clock = installed()
    table = Table(7)
    writer = Writer(table, fail_on_call=4)  # the fourth page, the last (short) one, fails once
    rewrite = declare(table, writer, batch=2, rate=2)  # 500 ms between batch starts
    await enqueue(driver, rewrite)
    began = time.monotonic()
    assert (await attempt(driver, rewrite)).outcome == "retried"
    assert time.monotonic() - began >= 1.4  # three paid pauses before the fourth batch
    clock.advance(3_600_000)
    began = time.monotonic()
    done = await attempt(driver, rewrite)
    assert done.outcome == "completed"
    # Three checkpoints replayed and the fourth page ran first in its attempt: no pause at all
    # (three replayed pauses would be 1.5 s; the bound leaves a loaded machine room).
    assert time.monotonic() - began < 1.0


def test_rate_and_batch_are_not_part_of_the_checksum() -> None:
    table = Table(0)
    writer = Writer(table)
    slow = backfill(name="a", source=table.source, handle=writer, tenant="none", rate=1, batch=10)
    fast = backfill(name="b", source=table.source, handle=writer, tenant="none", rate=200)
    from ujobs.backfill.declare import definition_of

    a, b = definition_of(slow), definition_of(fast)
    assert a is not None
    assert b is not None
    assert a.checksum != b.checksum  # the names differ
    from ujobs.backfill import definition_checksum

    same: dict[str, Any] = {"name": "n", "source": table.source, "handle": writer, "count": None}
    base = definition_checksum(requires=None, environments=None, **same)
    assert definition_checksum(requires="m", environments=None, **same) != base
    # Pacing and page size are tuning: a retuned sweep is the same sweep.
    retuned = backfill(name="a2", source=table.source, handle=writer, tenant="none", batch=500)
    c = definition_of(retuned)
    assert c is not None
    assert c.checksum == definition_checksum(
        name="a2", source=table.source, handle=writer, count=None, requires=None, environments=None
    )
    assert a.checksum == definition_checksum(
        name="a", source=table.source, handle=writer, count=None, requires=None, environments=None
    )


# --- The x_backfills ledger ----------------------------------------------------------------------


async def test_the_pass_is_the_no_op_never_the_enqueue_and_force_writes_a_new_row(
    caplog: pytest.LogCaptureFixture,
) -> None:
    driver, clock = installed()
    table = Table(2)
    rewrite = declare(table, Writer(table))
    await enqueue(driver, rewrite)
    first = await attempt(driver, rewrite)
    assert first.outcome == "completed"

    clock.advance(1_000)
    again = await driver.enqueue(rewrite.request({}))
    assert not again.deduped  # a completed job holds no live key: a real row
    table.pages.clear()
    skipped = await attempt(driver, rewrite)
    assert skipped.result == {
        "name": "rewrite-slugs",
        "batches": 0,
        "rows": 0,
        "skipped": True,
        "previousRunId": first.run_id,
    }
    assert table.pages == []
    assert records(caplog, "jobs.backfill.checksum-moved") == []

    await driver.enqueue(rewrite.request({"force": True}))
    forced = await attempt(driver, rewrite)
    assert forced.result["skipped"] is False
    assert forced.result["rows"] == 2
    rows = await ledger_rows(driver)
    assert [(r.run_id, r.status) for r in rows] == [
        (forced.run_id, "completed"),
        (first.run_id, "completed"),
    ]


async def test_a_moved_checksum_warns_and_never_refuses(caplog: pytest.LogCaptureFixture) -> None:
    driver, _ = installed()
    table = Table(2)
    rewrite = declare(table, Writer(table))
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "completed"
    from ujobs.jobs.job import reset_declared_names

    reset_declared_names()
    moved = declare(table, Writer(table), count=table.unslugged)  # another definition, one name
    await enqueue(driver, moved)
    with caplog.at_level(logging.WARNING, logger="ujobs.jobs"):
        skipped = await attempt(driver, moved)
    assert skipped.result["skipped"] is True
    assert len(records(caplog, "jobs.backfill.checksum-moved")) == 1


async def test_a_retuned_batch_is_not_a_moved_checksum_nor_is_a_row_hashed_with_its_batch(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """``batch`` is tuning, as ``rate`` is; and a completed row an earlier release wrote (its
    checksum hashed the batch too) still matches its unchanged declaration."""
    from ujobs.backfill import definition_checksum
    from ujobs.backfill.declare import definition_of
    from ujobs.backfill.ledger_view import inspect_backfills, pending_backfills
    from ujobs.jobs.job import reset_declared_names

    driver, clock = installed()
    table = Table(2)
    rewrite = declare(table, Writer(table), batch=3)
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "completed"
    reset_declared_names()
    retuned = declare(table, Writer(table), batch=500)
    definition = definition_of(retuned)
    assert definition is not None
    ledger = driver.backfills
    assert ledger is not None
    older = definition_checksum(
        name="rewrite-slugs",
        batch=500,
        source=table.source,
        handle=definition.handle,
        count=None,
        requires=None,
        environments=None,
    )
    assert older == definition.checksum_with_batch
    assert older != definition.checksum
    # What a release that hashed the batch left: the newest completed row, under that checksum.
    clock.advance(1_000)
    await ledger.begin("rewrite-slugs", "run-of-an-earlier-release", older, None)
    await ledger.finish("rewrite-slugs", "run-of-an-earlier-release", "completed")
    await driver.enqueue(retuned.request({}))
    with caplog.at_level(logging.WARNING, logger="ujobs.jobs"):
        skipped = await attempt(driver, retuned)
    assert skipped.result["skipped"] is True
    assert records(caplog, "jobs.backfill.checksum-moved") == []
    runs = await inspect_backfills(ledger)
    diff = pending_backfills(runs=runs, environment=None, declarations=[definition.describe()])
    assert [r["checksumMoved"] for r in diff["rows"]] == [False]


async def test_only_a_completed_row_blocks_and_a_retry_adopts_its_own_row() -> None:
    driver, clock = installed()
    table = Table(5)
    rewrite = declare(table, Writer(table, fail_on_call=2))
    await enqueue(driver, rewrite)
    failed = await attempt(driver, rewrite)
    assert failed.outcome == "retried"
    [row] = await ledger_rows(driver)
    assert (row.status, row.rows_processed, row.last_cursor) == ("failed", 3, 3)
    assert row.error is not None
    assert "went away" in row.error
    assert row.started_at_ms == T0

    clock.advance(3_600_000)
    done = await attempt(driver, rewrite)
    assert done.outcome == "completed"
    [row] = await ledger_rows(driver)  # adopted, not a second row
    assert (row.run_id, row.status, row.rows_processed) == (failed.run_id, "completed", 5)
    assert row.started_at_ms == T0  # when the pass began, not this attempt
    assert row.completed_at_ms == T0 + 3_600_000


async def test_the_ledger_records_the_tenant_and_a_completed_pass_blocks_its_own_scope() -> None:
    """A pass scoped to one org writes that org on its row; another org's pass is not made a
    no-op by it, and a ``tenant='none'`` pass records no tenant."""
    driver, _ = installed()
    table = Table(4)
    org = ["org_a"]
    scoped = declare(table, Writer(table), tenant=lambda _input: org[0])
    await enqueue(driver, scoped)
    first = await attempt(driver, scoped)
    assert first.result["skipped"] is False

    org[0] = "org_b"
    await enqueue(driver, scoped)
    second = await attempt(driver, scoped)
    assert second.result["skipped"] is False  # org_a's completed pass is not org_b's
    rows = {r.run_id: r.tenant for r in await ledger_rows(driver)}
    assert rows == {first.run_id: "org_a", second.run_id: "org_b"}

    org[0] = "org_a"
    await enqueue(driver, scoped)
    again = await attempt(driver, scoped)
    assert again.result == {
        "name": "rewrite-slugs",
        "batches": 0,
        "rows": 0,
        "skipped": True,
        "previousRunId": first.run_id,
    }


async def test_two_orgs_passes_under_one_run_id_keep_their_own_ledger_rows() -> None:
    """The run id is the caller's: org_b's pass under org_a's run id writes org_b's row, and
    org_a's row keeps org_a's own progress and ending."""
    driver, _ = installed()
    table = Table(4)
    org = ["org_a"]
    scoped = declare(table, Writer(table), tenant=lambda _input: org[0])
    for name in ("org_a", "org_b"):
        org[0] = name
        request = dataclasses.replace(scoped.request(None, clock=driver.clock), run_id="chosen")
        await driver.enqueue(request)
        done = await attempt(driver, scoped)
        assert (done.outcome, done.result["skipped"], done.run_id) == ("completed", False, "chosen")
    rows = sorted(
        (r.run_id, r.tenant, r.status, r.rows_processed) for r in await ledger_rows(driver)
    )
    assert rows == [("chosen", "org_a", "completed", 4), ("chosen", "org_b", "completed", 4)]


async def test_an_unscoped_pass_records_no_tenant() -> None:
    driver, _ = installed()
    table = Table(2)
    rewrite = declare(table, Writer(table))
    await enqueue(driver, rewrite)
    assert (await attempt(driver, rewrite)).outcome == "completed"
    assert [r.tenant for r in await ledger_rows(driver)] == [None]


async def test_a_running_row_is_this_pass_resuming() -> None:
    driver, _ = installed()
    table = Table(2)
    rewrite = declare(table, Writer(table))
    enqueued = await driver.enqueue(rewrite.request({}))
    ledger = driver.backfills
    assert ledger is not None
    # What a SIGKILLed attempt leaves: the row running, begun by this run.
    await ledger.begin("rewrite-slugs", enqueued.run_id, "old", None)
    done = await attempt(driver, rewrite)
    assert done.result["skipped"] is False
    assert [r.status for r in await ledger_rows(driver)] == ["completed"]


async def test_a_drain_in_the_throttle_pause_leaves_the_row_running_for_the_next_attempt() -> None:
    """The pause unwinds with ``X_ABORTED`` caused by the drain: the attempt is handed back
    uncounted, so the row is not ``failed`` (``--pending`` would exit 3 after every deploy)."""
    driver, clock = installed()
    table = Table(3)
    first_page = asyncio.Event()

    class Signalling(Writer):
        async def __call__(self, rows: Any, signal: Signal) -> None:
            await super().__call__(rows, signal)
            first_page.set()

    rewrite = declare(table, Signalling(table), batch=2, rate=0.01)  # 100 s between batches
    await enqueue(driver, rewrite)
    claimed = await claim(driver)
    worker_signal = Signal()
    running = asyncio.create_task(
        execute_job(claimed, driver=driver, handle=rewrite, context=None, signal=worker_signal)
    )
    await first_page.wait()
    while not running.done() and not pausing():
        await asyncio.sleep(0)
    worker_signal.abort(drain_reason("w1", "SIGTERM"))
    drained = await running
    assert (drained.outcome, drained.code, drained.attempt_counted) == (
        "interrupted",
        "X_DRAINING",
        False,
    )
    [row] = await ledger_rows(driver)
    assert (row.status, row.rows_processed, row.error) == ("running", 2, None)
    clock.advance(1_000)
    done = await attempt(driver, rewrite)
    assert done.outcome == "completed"
    [row] = await ledger_rows(driver)  # the next attempt adopted it
    assert (row.run_id, row.status, row.rows_processed) == (claimed.run_id, "completed", 3)


def pausing() -> bool:
    """Whether a coroutine is parked in the throttle's pause (``_pause`` suspended). Found
    among every live coroutine, not by walking tasks: the body runs inside its run's task
    (``ujobs.execution.inline_body``), where no ``cr_await`` chain leads to it."""
    return any(
        isinstance(o, types.CoroutineType)
        and o.cr_code.co_name == "_pause"
        and inspect.getcoroutinestate(o) == inspect.CORO_SUSPENDED
        for o in gc.get_objects()
    )


async def test_a_driver_without_a_ledger_runs_the_pass_anyway() -> None:
    driver, _ = frozen_driver()

    class NoLedger:
        backfills = None

        def __getattr__(self, name: str) -> Any:
            return getattr(driver, name)

    set_job_driver(NoLedger())
    table = Table(2)
    rewrite = declare(table, Writer(table))
    await enqueue(driver, rewrite)
    done = await attempt(driver, rewrite)
    assert done.result["rows"] == 2
    assert await ledger_rows(driver) == []
    assert table.unslugged() == 0


# --- Three optional declarations -----------------------------------------------------------------


async def test_environments_is_the_rail_of_the_pass() -> None:
    driver, _ = installed()
    table = Table(2)
    cleanup = declare(table, Writer(table), environments=["staging", "production"])
    configure_backfills(environment="development")
    await enqueue(driver, cleanup)
    refused = await attempt(driver, cleanup)
    assert refused.outcome == "dead-lettered"  # terminal: a retry cannot change the deploy
    assert refused.code == "X_BACKFILL_ENVIRONMENT"
    assert table.pages == []

    configure_backfills(environment="staging")
    await enqueue(driver, cleanup)
    assert (await attempt(driver, cleanup)).outcome == "completed"


async def test_count_above_zero_after_the_last_batch_is_stalled() -> None:
    driver, _ = installed()
    table = Table(4)

    def lying_source(ctx: Any) -> Any:
        table.rows = table.rows[:2] + [dict(r, id=-r["id"]) for r in table.rows[2:]]
        return table.source(ctx)

    stalled = backfill(
        name="stalls",
        source=lying_source,
        handle=Writer(table),
        tenant="none",
        count=table.unslugged,
        rate=1_000,
    )
    await enqueue(driver, stalled)
    result = await attempt(driver, stalled)
    assert result.outcome == "dead-lettered"
    assert result.code == "X_BACKFILL_STALLED"
    [row] = await ledger_rows(driver)
    assert row.status == "failed"


@pytest.mark.parametrize("answer", [math.nan, -1, 1.5, True, "0", None, 2**53])
async def test_count_is_parsed_not_trusted(answer: Any) -> None:
    driver, _ = installed()
    table = Table(1)
    parsed = declare(table, Writer(table), count=lambda _ctx: answer)
    await enqueue(driver, parsed)
    result = await attempt(driver, parsed)
    assert result.code == "X_INVARIANT"


async def test_a_count_of_zero_completes_and_count_may_be_async() -> None:
    driver, _ = installed()
    table = Table(3)

    async def count(ctx: Any) -> int:
        return table.unslugged(ctx)

    converged = declare(table, Writer(table), count=count)
    await enqueue(driver, converged)
    assert (await attempt(driver, converged)).outcome == "completed"
