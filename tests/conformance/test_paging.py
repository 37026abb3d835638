"""``list()``: one page newest first, cursors both ways, filters, and the page bounds."""

from __future__ import annotations

import base64

import orjson
import pytest

from tests.support.conformance import claim_one, make_in_state, req
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    DEFAULT_JOB_PAGE,
    MAX_JOB_PAGE,
    JobDriver,
    JobFilter,
    JobIntrospection,
    JobRow,
    job_cursor,
)
from ujobs.errors import JobPageInvalidError


async def _rows(driver: JobDriver, clock: FrozenClock, n: int) -> list[str]:
    """``n`` rows over a few milliseconds, several sharing one ``created_at``; ids newest first."""
    ids = []
    for i in range(n):
        ids.append((await driver.enqueue(req())).id)
        if i % 3 == 2:
            clock.advance(1)
    return ids[::-1]


def _ids(rows: list[JobRow]) -> list[str]:
    return [r.id for r in rows]


async def test_pages_walk_newest_first_without_gaps_or_overlaps(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    newest_first = await _rows(driver, clock, 25)
    pages = [await introspect.list(JobFilter(limit=10))]
    while not pages[-1].is_last:
        pages.append(await introspect.list(JobFilter(limit=10, after=pages[-1].next_cursor)))
    assert [len(p.rows) for p in pages] == [10, 10, 5]
    assert [i for p in pages for i in _ids(p.rows)] == newest_first
    for row in pages[0].rows:
        assert row.created_at_ms <= clock.now_ms()

    # ... and back: ``before`` the first row of a page is the page before it.
    back = await introspect.list(JobFilter(limit=10, before=pages[2].prev_cursor))
    assert _ids(back.rows) == _ids(pages[1].rows)
    back = await introspect.list(JobFilter(limit=10, before=back.prev_cursor))
    assert _ids(back.rows) == _ids(pages[0].rows)
    newest = await introspect.list(JobFilter(limit=10, before=back.prev_cursor))
    assert newest.rows == []
    assert newest.is_last


async def test_before_answers_the_rows_nearest_the_cursor(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    newest_first = await _rows(driver, clock, 12)
    everything = await introspect.list(JobFilter(limit=12))
    at = everything.rows[8]
    page = await introspect.list(JobFilter(limit=3, before=job_cursor(at)))
    assert _ids(page.rows) == newest_first[5:8]
    short = await introspect.list(JobFilter(limit=5, before=job_cursor(everything.rows[2])))
    assert _ids(short.rows) == newest_first[:2]
    assert short.is_last
    after = await introspect.list(JobFilter(limit=3, after=job_cursor(at)))
    assert _ids(after.rows) == newest_first[9:12]


async def test_the_default_page_and_the_largest(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue_many([req() for _ in range(MAX_JOB_PAGE + 1)])
    assert len((await introspect.list(JobFilter())).rows) == DEFAULT_JOB_PAGE
    full = await introspect.list(JobFilter(limit=MAX_JOB_PAGE))
    assert len(full.rows) == MAX_JOB_PAGE
    assert not full.is_last
    rest = await introspect.list(JobFilter(limit=MAX_JOB_PAGE, after=full.next_cursor))
    assert len(rest.rows) == 1
    assert rest.is_last


@pytest.mark.parametrize("limit", [MAX_JOB_PAGE + 1, 0, -1])
async def test_a_limit_out_of_bounds_is_refused(introspect: JobIntrospection, limit: int) -> None:
    with pytest.raises(JobPageInvalidError) as caught:
        await introspect.list(JobFilter(limit=limit))
    assert caught.value.code == "X_JOB_PAGE_INVALID"


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


@pytest.mark.parametrize(
    "cursor",
    [
        "not a cursor!",
        _b64(b"not json"),
        _b64(orjson.dumps({"created": 1, "id": "x"})),
        _b64(orjson.dumps(["1", "x"])),
        _b64(orjson.dumps([1])),
        "",
    ],
)
@pytest.mark.parametrize("which", ["after", "before"])
async def test_a_cursor_no_page_produced_is_refused(
    introspect: JobIntrospection, cursor: str, which: str
) -> None:
    flt = JobFilter(after=cursor) if which == "after" else JobFilter(before=cursor)
    with pytest.raises(JobPageInvalidError) as caught:
        await introspect.list(flt)
    assert caught.value.code == "X_JOB_PAGE_INVALID"
    assert caught.value.meta["cursor"] == which


async def test_after_and_before_together_are_refused(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue(req())
    cursor = (await introspect.list(JobFilter())).next_cursor
    with pytest.raises(JobPageInvalidError):
        await introspect.list(JobFilter(after=cursor, before=cursor))


async def test_filters(driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock) -> None:
    a = await driver.enqueue(req("alpha", queue="q1", tenant_id="t1"))
    clock.advance(10)
    b = await driver.enqueue(req("beta", queue="q2", tenant_id="t2"))
    clock.advance(10)
    c = await driver.enqueue(req("alpha", queue="q2", tenant_id=None))
    done = await make_in_state(driver, "done", req("gamma", queue="q3"))

    async def ids(**kw: object) -> set[str]:
        page = await introspect.list(JobFilter(**kw))  # type: ignore[arg-type]
        return set(_ids(page.rows))

    assert await ids(queue="q2") == {b.id, c.id}
    assert await ids(name="alpha") == {a.id, c.id}
    assert await ids(tenant_id="t1") == {a.id}
    assert await ids(state="done") == {done}
    assert await ids(state="ready", queue="q2", name="alpha") == {c.id}
    start = clock.now_ms() - 20
    assert await ids(created_from_ms=start + 10) == {b.id, c.id, done}
    assert await ids(created_to_ms=start + 9) == {a.id}
    assert await ids(created_to_ms=start + 10) == {a.id, b.id}, "both bounds are inclusive"
    assert await ids(created_from_ms=start + 10, created_to_ms=start + 10) == {b.id}
    assert await ids(created_from_ms=start + 11, created_to_ms=start + 19) == set()
    everyone = {a.id, b.id, c.id, done}
    prefix = b.id[:14]
    assert await ids(id_prefix=prefix) == {i for i in everyone if i.startswith(prefix)}
    assert await ids(id_prefix=b.id.upper()) == {b.id}
    assert await ids(id_prefix=b.id) == {b.id}


async def test_filters_and_cursors_compose(
    driver: JobDriver, introspect: JobIntrospection, clock: FrozenClock
) -> None:
    wanted = []
    for i in range(9):
        enq = await driver.enqueue(req("pick" if i % 2 == 0 else "skip"))
        if i % 2 == 0:
            wanted.append(enq.id)
        clock.advance(1)
    first = await introspect.list(JobFilter(name="pick", limit=3))
    second = await introspect.list(JobFilter(name="pick", limit=3, after=first.next_cursor))
    assert _ids(first.rows) + _ids(second.rows) == wanted[::-1]
    assert second.is_last


async def test_a_listed_row_shows_its_state(
    driver: JobDriver, introspect: JobIntrospection
) -> None:
    await driver.enqueue(req())
    job = await claim_one(driver, worker="w7")
    [row] = (await introspect.list(JobFilter())).rows
    assert (row.id, row.state, row.claimed_by, row.attempt) == (job.id, "running", "w7", 1)
