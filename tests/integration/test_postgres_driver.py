"""The Postgres driver's own paths: dedupe under races, the claim statement's two arms, fenced
settles with counters in the same statement, the throttled wake, progress, stats."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import asyncpg
import pytest

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    LEASE_LAPSED_FINAL_ATTEMPT,
    ClaimOptions,
    ClaimRef,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    NackOptions,
)
from ujobs.drivers.postgres.driver import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.enqueue import COPY_PAUSE_BATCHES
from ujobs.drivers.postgres.sql import query
from ujobs.errors import ClaimQueuesEmptyError, InputInvalidError, InvariantError


def req(key: str, **kw: Any) -> EnqueueRequest:
    return EnqueueRequest(name=kw.pop("name", "send"), input={"k": key}, idempotency_key=key, **kw)


def opts(limit: int = 10, **kw: Any) -> ClaimOptions:
    return ClaimOptions(queues=kw.pop("queues", ["default"]), limit=limit, worker_id="w1", **kw)


async def state_of(pool: asyncpg.Pool[Any], job_id: str) -> str:
    return str(await pool.fetchval("select state from x_jobs where id = $1", job_id))


async def test_an_id_that_names_a_finished_row_inserts_nothing(pg: PostgresDriver) -> None:
    first = await pg.enqueue(req("a", id="job-1"))
    [job] = await pg.claim(opts())
    assert await pg.ack(job.id, job.ref)
    again = await pg.enqueue(req("other-key", id="job-1"))
    assert (again.id, again.run_id, again.deduped) == (first.id, first.run_id, True)
    fresh = await pg.enqueue(req("a"))
    assert fresh.deduped is False
    assert fresh.id != first.id


async def test_concurrent_enqueues_of_one_key_make_one_row(
    pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    drivers = [postgres_driver(pg_pool, clock=clock) for _ in range(6)]
    answers = await asyncio.gather(*(d.enqueue(req("same")) for d in drivers))
    assert len({a.id for a in answers}) == 1
    assert sorted(a.deduped for a in answers) == [False] + [True] * 5
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 1


async def test_enqueue_many_dedupes_inside_the_batch_and_against_rows(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    held = await pg.enqueue(req("held"))
    out = await pg.enqueue_many(
        [req("x"), req("held"), req("x"), req("y", id="fixed"), req("z", id="fixed")]
    )
    assert [a.deduped for a in out] == [False, True, True, False, True]
    assert out[1].id == held.id
    assert out[2].id == out[0].id
    assert out[4].id == "fixed"
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 3


async def test_enqueue_many_mints_ids_for_the_jobs_that_need_them_in_batch_order(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    """The batch's ids are minted at once (``new_ids``): unique, increasing in batch order,
    after every earlier one; a given id or run id is kept, an empty one is minted."""
    before = await pg.enqueue(req("before"))
    out = await pg.enqueue_many(
        [req(f"k{i}") for i in range(40)]
        + [req("given", id="given-id", run_id=""), req("given-run", run_id="given-run-id")]
        + [req("k3"), req("empty-id", id="")]
    )
    minted = [a.id for a in out[:40]]
    assert minted == sorted(minted)
    assert before.id < minted[0]
    assert len({a.id for a in out} | {a.run_id for a in out}) == 2 * len(out) - 2  # k3 repeats
    assert out[40].id == "given-id"
    assert out[40].run_id not in ("", None)
    assert out[41].run_id == "given-run-id"
    assert out[42] == Enqueued(out[3].id, out[3].run_id, True)
    assert out[43].id not in ("", None)
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 44


async def test_enqueue_many_copies_first_and_dedupes_when_it_meets_a_taken_row(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    """A batch first goes out as a COPY; one that meets a taken id or live key inserts
    nothing by it (COPY is all or nothing) and is answered by the deduping statement exactly
    as before. The next COPY_PAUSE_BATCHES batches go straight there."""
    enqueuer = pg._enqueuer
    fresh = await pg.enqueue_many([req("a"), req("b", id="id-b")])
    assert [a.deduped for a in fresh] == [False, False]
    assert enqueuer._deduping_batches == 0  # the COPY took the whole batch
    rows = await pg_pool.fetch("select id, run_id, state from x_jobs order by seq")
    assert [(r["id"], r["run_id"], r["state"]) for r in rows] == [
        (a.id, a.run_id, "ready") for a in fresh
    ]
    seq_before = await pg_pool.fetchval("select max(seq) from x_jobs")
    out = await pg.enqueue_many([req("c"), req("a"), req("d", id="id-b"), req("e")])
    assert [a.deduped for a in out] == [False, True, True, False]
    assert (out[1].id, out[1].run_id) == (fresh[0].id, fresh[0].run_id)
    assert (out[2].id, out[2].run_id) == (fresh[1].id, fresh[1].run_id)
    assert enqueuer._deduping_batches == COPY_PAUSE_BATCHES
    new = await pg_pool.fetch("select id from x_jobs where seq > $1 order by seq", seq_before)
    assert [r["id"] for r in new] == [out[0].id, out[3].id]
    for i in range(COPY_PAUSE_BATCHES):
        [one] = await pg.enqueue_many([req(f"later-{i}")])
        assert one.deduped is False
    assert enqueuer._deduping_batches == 0
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 4 + COPY_PAUSE_BATCHES


async def test_enqueue_refuses_max_attempts_below_one(pg: PostgresDriver) -> None:
    with pytest.raises(InvariantError):
        await pg.enqueue(req("a", max_attempts=0))


async def test_claim_takes_oldest_due_first_and_skips_paused_and_future(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    late = await pg.enqueue(req("late", run_at_ms=clock.now_ms() + 5_000))
    second = await pg.enqueue(req("b", run_at_ms=clock.now_ms() - 10))
    first = await pg.enqueue(req("a", run_at_ms=clock.now_ms() - 20))
    await pg.enqueue(req("p", queue="paused"))
    await pg.introspect.pause_queue("paused")
    got = await pg.claim(opts(queues=["default", "paused"]))
    assert [j.id for j in got] == [first.id, second.id]
    assert all(j.attempt == 1 and j.claim == 1 and j.worker_id == "w1" for j in got)
    assert got[0].lease_expires_at_ms == clock.now_ms() + 30_000
    clock.advance(5_000)
    [j] = await pg.claim(opts())
    assert j.id == late.id


async def test_claim_refuses_no_queues_and_a_zero_limit(pg: PostgresDriver) -> None:
    with pytest.raises(ClaimQueuesEmptyError):
        await pg.claim(ClaimOptions(queues=[], limit=1, worker_id="w"))
    with pytest.raises(InvariantError):
        await pg.claim(opts(limit=0))


async def test_two_claimers_never_share_a_row(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    await pg.enqueue_many([req(f"k{i}") for i in range(60)])
    other = postgres_driver(pg_pool, clock=clock)
    batches = await asyncio.gather(*(d.claim(opts(limit=7)) for d in [pg, other] * 5))
    ids = [j.id for batch in batches for j in batch]
    assert len(ids) == len(set(ids)) == 60


async def test_a_lapsed_lease_is_taken_again_with_the_next_attempt(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    await pg.enqueue(req("a"))
    [first] = await pg.claim(opts(visibility_ms=1_000))
    assert await pg.claim(opts()) == []
    clock.advance(1_000)
    [again] = await pg.claim(opts())
    assert (again.id, again.attempt, again.claim) == (first.id, 2, 2)
    assert not await pg.ack(first.id, first.ref)
    assert await pg.heartbeat(first.id, first.ref, 1_000) == "lost"
    assert await pg.ack(again.id, again.ref)


async def test_a_lapsed_final_attempt_is_buried_counted_and_reported_once(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    dead = await pg.enqueue(req("dies", max_attempts=1))
    dropped = await pg.enqueue(req("drops", name="quiet", max_attempts=1))
    await pg.claim(opts(visibility_ms=100))
    clock.advance(100)
    told: list[Sequence[ExhaustedJob]] = []

    async def on_exhausted(rows: Sequence[ExhaustedJob]) -> None:
        told.append(rows)

    got = await pg.claim(opts(on_exhausted=on_exhausted, drop_exhausted=frozenset({"quiet"})))
    assert got == []
    assert len(told) == 1
    by_id = {row.id: row for row in told[0]}
    assert by_id[dead.id].state == "dead"
    assert by_id[dropped.id].state == "failed"
    assert by_id[dead.id].last_error == LEASE_LAPSED_FINAL_ATTEMPT
    assert await state_of(pg_pool, dead.id) == "dead"
    assert await state_of(pg_pool, dropped.id) == "failed"
    counts = {c.job: c for c in await pg.introspect.counter_totals(0)}
    assert (counts["send"].dead, counts["quiet"].failed) == (1, 1)
    assert await pg.claim(opts(on_exhausted=on_exhausted)) == []
    assert len(told) == 1


async def test_settles_are_fenced_on_the_claim_and_count_in_the_same_statement(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    await pg.enqueue_many([req("a"), req("b"), req("c"), req("d")])
    a, b, c, d = await pg.claim(opts())
    stranger = ClaimRef("w2", a.claim)
    assert not await pg.ack(a.id, stranger)
    assert not await pg.nack(a.id, ClaimRef("w1", a.claim + 1), NackOptions())
    assert await pg.ack(a.id, a.ref, duration_ms=40)
    assert await pg.nack(b.id, b.ref, NackOptions(error="boom"))
    assert await pg.nack(c.id, c.ref, NackOptions(error="bad", dead_letter=True))
    assert await pg.nack(d.id, d.ref, NackOptions(park=True, count=False, run_at_ms=1))
    assert not await pg.ack(a.id, a.ref)
    [totals] = await pg.introspect.counter_totals(0)
    assert (totals.done, totals.retried, totals.dead, totals.failed) == (1, 1, 1, 0)
    assert totals.duration_ms == 40
    row = await pg_pool.fetchrow("select state, attempt, last_error from x_jobs where id=$1", d.id)
    assert dict(row or {}) == {"state": "suspended", "attempt": 0, "last_error": None}
    assert await state_of(pg_pool, c.id) == "dead"


async def test_concurrent_acks_are_answered_each_and_all_land(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    await pg.enqueue_many([req(f"k{i}") for i in range(50)])
    jobs = await pg.claim(opts(limit=50))
    wrong = [pg.ack(j.id, ClaimRef("w1", j.claim + 1)) for j in jobs[:5]]
    answers = await asyncio.gather(*wrong, *(pg.ack(j.id, j.ref) for j in jobs))
    assert answers == [False] * 5 + [True] * 50
    assert await pg_pool.fetchval("select count(*) from x_jobs where state = 'done'") == 50
    [totals] = await pg.introspect.counter_totals(0)
    assert totals.done == 50


async def test_heartbeat_renews_reports_cancel_and_loss(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    await pg.enqueue_many([req("a"), req("b")])
    a, b = await pg.claim(opts(visibility_ms=1_000))
    clock.advance(900)
    assert await pg.heartbeat(a.id, a.ref, 1_000) == "renewed"
    clock.advance(900)
    assert [j.id for j in await pg.claim(opts())] == [b.id]  # b lapsed; a is still held
    assert await pg.heartbeat(a.id, a.ref, 1_000) == "renewed"
    assert await pg.heartbeat(b.id, b.ref, 1_000) == "lost"
    assert await pg.introspect.cancel(a.id, "operator") is not None
    assert await pg.heartbeat(a.id, a.ref, 1_000) == "cancelled"
    assert not await pg.ack(a.id, a.ref)


async def test_steps_are_saved_only_under_the_claim_and_load_in_order(
    pg: PostgresDriver, clock: FrozenClock
) -> None:
    await pg.enqueue(req("a"))
    [j] = await pg.claim(opts())
    assert await pg.save_step(j.id, j.ref, j.run_id, "one", {"n": 1}, started_at_ms=5)
    assert await pg.save_step(j.id, j.ref, j.run_id, "two", [1, "x"], started_at_ms=6)
    assert await pg.save_step(j.id, j.ref, j.run_id, "one", {"n": 99}, started_at_ms=7)
    assert not await pg.save_step(j.id, ClaimRef("w9", 1), j.run_id, "x", 1, started_at_ms=8)
    assert not await pg.save_step(j.id, j.ref, "other-run", "x", 1, started_at_ms=8)
    steps = await pg.load_steps(j.run_id, tenant_id=j.tenant_id)
    assert [(s.name, s.output, s.started_at_ms) for s in steps] == [
        ("one", {"n": 1}, 5),
        ("two", [1, "x"], 6),
    ]
    assert steps[0].finished_at_ms == clock.now_ms()


async def listen(dsn: str) -> tuple[asyncpg.Connection[Any], list[str]]:
    conn = await asyncpg.connect(dsn)
    heard: list[str] = []
    await conn.add_listener("x_jobs_wake", lambda *args: heard.append(args[3]))
    return conn, heard


async def wait_quiet(conn: asyncpg.Connection[Any]) -> None:
    """Notifications of committed statements arrive before the answer to a later query."""
    await conn.fetchval("select 1")
    await asyncio.sleep(0.05)
    await conn.fetchval("select 1")


async def test_enqueue_wakes_each_queue_once_per_slot_and_never_on_dedupe(
    pg: PostgresDriver, pg_dsn: str, clock: FrozenClock
) -> None:
    conn, heard = await listen(pg_dsn)
    try:
        await pg.enqueue(req("a"))
        await pg.enqueue(req("b"))
        await pg.enqueue(req("a"))
        await pg.enqueue(req("far", run_at_ms=clock.now_ms() + 5_000))
        await pg.enqueue(req("q", queue="other"))
        await wait_quiet(conn)
        assert sorted(heard) == ["default", "other"]
        clock.advance(250)
        await pg.enqueue(req("a"))  # deduped: silent
        await pg.enqueue(req("soon", run_at_ms=clock.now_ms() + 1_000))
        await pg.enqueue_many([req("m1"), req("m2", queue="other")])
        await wait_quiet(conn)
        assert sorted(heard) == ["default", "default", "other", "other"]
    finally:
        await conn.close()


async def test_a_single_enqueue_sends_the_plain_insert_unless_it_must_announce_or_dedupe(
    pg: PostgresDriver, pg_dsn: str, clock: FrozenClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``enqueue_insert`` (no CTEs) when the slot is already announced; ``enqueue`` for the
    announcement, and after a plain insert that inserted nothing, to answer the holder."""
    sent: list[str] = []
    enqueuer = pg._enqueuer
    fetch = enqueuer._fetch

    async def recording(sql: str, *args: Any) -> list[Any]:
        sent.append("plain" if sql == query("enqueue_insert") else "full")
        return await fetch(sql, *args)

    monkeypatch.setattr(enqueuer, "_fetch", recording)
    conn, heard = await listen(pg_dsn)
    try:
        first = await pg.enqueue(req("a"))  # announces the slot
        second = await pg.enqueue(req("b"))
        again = await pg.enqueue(req("a"))  # plain inserts nothing, the full answers the holder
        far = await pg.enqueue(req("far", run_at_ms=clock.now_ms() + 5_000))
        [job] = await pg.claim(opts(limit=1))
        assert job.id == first.id
        assert await pg.ack(job.id, job.ref)
        by_id = await pg.enqueue(req("new-key", id=first.id))  # names a finished row
        after = await pg.enqueue(req("a"))  # the holder finished: a new row
        await wait_quiet(conn)
    finally:
        await conn.close()
    assert sent == ["full", "plain", "plain", "full", "plain", "plain", "full", "plain"]
    assert heard == ["default"]
    assert [a.deduped for a in (first, second, again, far, by_id, after)] == [
        False,
        False,
        True,
        False,
        True,
        False,
    ]
    assert (again.id, again.run_id) == (first.id, first.run_id)
    assert (by_id.id, by_id.run_id) == (first.id, first.run_id)
    assert after.id not in (first.id, second.id, far.id)


async def test_progress_is_throttled_and_the_last_report_lands_with_the_settle(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> None:
    await pg.enqueue(req("a"))
    [j] = await pg.claim(opts())

    async def stored() -> Any:
        row = await pg.introspect.get(j.id)
        assert row is not None
        return row.progress

    assert await pg.introspect.record_progress(j.id, j.ref, {"done": 1})
    assert await pg.introspect.record_progress(j.id, j.ref, {"done": 2})
    assert await stored() == {"done": 1}
    assert await pg.introspect.record_progress(j.id, j.ref, {"done": 3}, force=True)
    assert await stored() == {"done": 3}
    clock.advance(1_000)
    assert await pg.introspect.record_progress(j.id, j.ref, {"done": 4})
    assert await pg.introspect.record_progress(j.id, j.ref, {"done": 5})
    assert await stored() == {"done": 4}
    assert await pg.ack(j.id, j.ref)
    assert await stored() == {"done": 5}
    assert not await pg.introspect.record_progress(j.id, j.ref, {"done": 6}, force=True)


async def test_stats_counts_per_queue_and_state(pg: PostgresDriver, clock: FrozenClock) -> None:
    await pg.enqueue_many([req("a"), req("b", run_at_ms=clock.now_ms() + 10), req("c")])
    await pg.enqueue(req("d", queue="q2"))
    await pg.introspect.pause_queue("q2")
    [j] = await pg.claim(opts(limit=1))
    await pg.ack(j.id, j.ref)
    stats = (await pg.stats()).queues
    d = stats["default"]
    assert (d.ready, d.delayed, d.done, d.due, d.paused) == (1, 1, 1, 1, False)
    assert d.oldest_due_run_at_ms == clock.now_ms()
    assert stats["q2"].paused
    assert stats["q2"].ready == 1


async def test_an_input_json_cannot_carry_is_refused_and_nothing_lands(
    pg: PostgresDriver, pg_pool: asyncpg.Pool[Any]
) -> None:
    with pytest.raises(InputInvalidError):
        await pg.enqueue(EnqueueRequest(name="n", input={"x": object()}, idempotency_key="a"))
    with pytest.raises(InputInvalidError):
        await pg.enqueue_many(
            [req("ok"), EnqueueRequest(name="n", input={1j}, idempotency_key="b")]
        )
    assert await pg_pool.fetchval("select count(*) from x_jobs") == 0
