"""The backfill ledger: one row per pass; a retry adopts its own row."""

from __future__ import annotations

from ujobs.clock import FrozenClock
from ujobs.drivers.base import BackfillLedger
from ujobs.ids import new_id


async def test_a_pass_begins_progresses_and_completes(
    backfills: BackfillLedger, clock: FrozenClock
) -> None:
    run_id = new_id()
    row = await backfills.begin("rewrite-slugs", run_id, "sha:1", "1.2.3")
    assert (row.name, row.run_id, row.checksum, row.app_version) == (
        "rewrite-slugs",
        run_id,
        "sha:1",
        "1.2.3",
    )
    assert (row.status, row.rows_processed, row.last_cursor) == ("running", 0, None)
    assert row.started_at_ms == clock.now_ms()
    assert row.completed_at_ms is None
    await backfills.progress("rewrite-slugs", run_id, 1_000, {"id": "p-1000"})
    await backfills.progress("rewrite-slugs", run_id, 2_000, {"id": "p-2000"})
    [running] = await backfills.list(name="rewrite-slugs")
    assert (running.rows_processed, running.last_cursor) == (2_000, {"id": "p-2000"})
    assert await backfills.latest_completed("rewrite-slugs") is None
    clock.advance(5_000)
    await backfills.finish("rewrite-slugs", run_id, "completed")
    done = await backfills.latest_completed("rewrite-slugs")
    assert done is not None
    assert (done.status, done.completed_at_ms, done.rows_processed) == (
        "completed",
        clock.now_ms(),
        2_000,
    )


async def test_a_retry_adopts_its_row_and_keeps_started_at(
    backfills: BackfillLedger, clock: FrozenClock
) -> None:
    run_id = new_id()
    first = await backfills.begin("drop-legacy", run_id, "sha:1", None)
    await backfills.progress("drop-legacy", run_id, 500, 500)
    await backfills.finish("drop-legacy", run_id, "failed", "X_TIMEOUT")
    [failed] = await backfills.list(name="drop-legacy")
    assert (failed.status, failed.error) == ("failed", "X_TIMEOUT")
    clock.advance(60_000)
    again = await backfills.begin("drop-legacy", run_id, "sha:1", None)
    assert again.started_at_ms == first.started_at_ms
    assert again.status == "running"
    assert again.rows_processed == 500
    assert len(await backfills.list(name="drop-legacy")) == 1


async def test_a_forced_rerun_is_a_new_row(backfills: BackfillLedger, clock: FrozenClock) -> None:
    first, second = new_id(), new_id()
    await backfills.begin("b", first, "sha:1", None)
    await backfills.finish("b", first, "completed")
    clock.advance(1_000)
    await backfills.begin("b", second, "sha:2", None)
    rows = await backfills.list(name="b")
    assert [(r.run_id, r.status) for r in rows] == [(second, "running"), (first, "completed")]
    latest = await backfills.latest_completed("b")
    assert latest is not None
    assert latest.run_id == first
    await backfills.finish("b", second, "completed")
    latest = await backfills.latest_completed("b")
    assert latest is not None
    assert latest.run_id == second


async def test_list_filters_and_limits(backfills: BackfillLedger, clock: FrozenClock) -> None:
    runs = {}
    for name in ("a", "b", "c"):
        runs[name] = new_id()
        await backfills.begin(name, runs[name], "sha", None)
        clock.advance(1_000)
    await backfills.finish("b", runs["b"], "completed")
    assert [r.name for r in await backfills.list()] == ["c", "b", "a"]
    assert [r.name for r in await backfills.list(limit=2)] == ["c", "b"]
    assert [r.name for r in await backfills.list(status="completed")] == ["b"]
    assert [r.name for r in await backfills.list(status="running")] == ["c", "a"]
    assert await backfills.list(name="zzz") == []
    assert await backfills.latest_completed("a") is None


async def test_a_pass_never_begun_has_no_row_to_move(backfills: BackfillLedger) -> None:
    await backfills.progress("nope", new_id(), 1, None)
    await backfills.finish("nope", new_id(), "completed")
    assert await backfills.list(name="nope") == []
    assert await backfills.latest_completed("nope") is None


async def test_a_row_records_its_tenant_and_a_completed_row_blocks_only_its_scope(
    backfills: BackfillLedger,
) -> None:
    org_a, org_b, everyone = new_id(), new_id(), new_id()
    row = await backfills.begin("per-org", org_a, "sha", None, "org_a")
    assert row.tenant == "org_a"
    assert (await backfills.begin("per-org", org_a, "sha", None, "org_a")).tenant == "org_a"
    await backfills.begin("per-org", org_b, "sha", None, "org_b")
    await backfills.begin("per-org", everyone, "sha", None)
    await backfills.finish("per-org", org_a, "completed", tenant="org_a")
    done = await backfills.latest_completed("per-org", "org_a")
    assert done is not None
    assert (done.run_id, done.tenant) == (org_a, "org_a")
    assert await backfills.latest_completed("per-org", "org_b") is None
    assert await backfills.latest_completed("per-org") is None
    await backfills.finish("per-org", everyone, "completed")
    unscoped = await backfills.latest_completed("per-org")
    assert unscoped is not None
    assert (unscoped.run_id, unscoped.tenant) == (everyone, None)
    listed = {r.run_id: r.tenant for r in await backfills.list(name="per-org")}
    assert listed == {org_a: "org_a", org_b: "org_b", everyone: None}


async def test_two_tenants_passes_under_one_run_id_are_two_rows(
    backfills: BackfillLedger, clock: FrozenClock
) -> None:
    """A run id is chosen by the caller: tenant B's pass under tenant A's run id is B's own
    row, and B's progress and ending never reach A's pass (nor make A's next pass a no-op)."""
    run_id = "run-chosen-by-both"
    await backfills.begin("per-org", run_id, "sha:1", "1.0", "org_a")
    await backfills.progress("per-org", run_id, 10, {"id": 10}, tenant="org_a")
    b = await backfills.begin("per-org", run_id, "sha:1", "1.0", "org_b")
    assert (b.tenant, b.rows_processed, b.last_cursor) == ("org_b", 0, None)
    await backfills.progress("per-org", run_id, 99, {"id": 99}, tenant="org_b")
    clock.advance(1_000)
    await backfills.finish("per-org", run_id, "completed", tenant="org_b")
    assert await backfills.latest_completed("per-org", "org_a") is None
    rows = {r.tenant: r for r in await backfills.list(name="per-org")}
    assert (rows["org_a"].status, rows["org_a"].rows_processed) == ("running", 10)
    assert rows["org_a"].last_cursor == {"id": 10}
    assert (rows["org_b"].status, rows["org_b"].rows_processed) == ("completed", 99)
    # The pass over every tenant under that run id is a third row; its ending is its own.
    await backfills.begin("per-org", run_id, "sha:1", "1.0")
    await backfills.finish("per-org", run_id, "failed", "boom")
    rows = {r.tenant: r for r in await backfills.list(name="per-org")}
    assert (rows[None].status, rows["org_a"].status) == ("failed", "running")
    # A retry of A's pass adopts A's row.
    again = await backfills.begin("per-org", run_id, "sha:1", "1.0", "org_a")
    assert (again.tenant, again.rows_processed) == ("org_a", 10)
    assert len(await backfills.list(name="per-org")) == 3
