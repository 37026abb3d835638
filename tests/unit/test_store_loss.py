"""``ujobs.execution.store_loss`` over a hand-driven keyspace mark: a refusal is explained only by
a mark that changed, each lost mark is reported once (with the rows the workers still count),
and a mark that cannot be read explains nothing."""

from __future__ import annotations

import logging

import pytest

from tests.support.worker import records
from ujobs.drivers.base import ClaimedJob
from ujobs.execution.store_loss import StoreLossReport


class HandMark:
    """A ``StoreWatch`` whose mark the test sets; counts the reads."""

    def __init__(self, mark: str | None) -> None:
        self.mark = mark
        self.reads = 0
        self.failing = False
        self._epoch: str | None = mark

    @property
    def prefix(self) -> str:
        return "p1"

    @property
    def epoch(self) -> str | None:
        return self._epoch

    async def verify(self) -> str:
        self.reads += 1
        if self.failing:
            raise ConnectionError("redis is away")
        assert self.mark is not None
        self._epoch = self.mark
        return self.mark


def claimed(job_id: str, epoch: str | None) -> ClaimedJob:
    return ClaimedJob(
        id=job_id,
        run_id=f"r-{job_id}",
        name="n",
        queue="default",
        input={},
        tenant_id=None,
        idempotency_key=job_id,
        attempt=1,
        max_attempts=3,
        worker_id="w",
        claim=1,
        run_at_ms=0,
        created_at_ms=0,
        lease_expires_at_ms=1,
        store_epoch=epoch,
    )


async def test_a_refusal_under_the_live_mark_is_an_ordinary_lost_lease(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mark = HandMark("m1")
    report = StoreLossReport(mark)
    assert not await report.explains(claimed("a", "m1"))
    assert mark.reads == 1  # it had to look: the mark this process knew was the row's
    assert not await report.explains(claimed("b", None))  # a store that cannot lose keys
    assert mark.reads == 1
    assert records(caplog, "jobs.store.lost") == []


async def test_each_lost_mark_is_reported_once_with_the_rows_still_held(
    caplog: pytest.LogCaptureFixture,
) -> None:
    mark = HandMark("m1")
    report = StoreLossReport(mark)
    held = {"m1": 3, "m2": 1}
    unregister = report.count_held(lambda epoch: held.get(epoch, 0))
    mark.mark = "m2"  # the keyspace came back empty and somebody wrote a new mark
    assert await report.explains(claimed("a", "m1"))
    assert await report.explains(claimed("b", "m1"))
    assert mark.reads == 1  # the second refusal is answered from what the first learnt
    report.observe()  # a claim that reads m2 afterwards reports nothing new
    [lost] = records(caplog, "jobs.store.lost")
    assert lost.levelno == logging.ERROR
    assert (lost.__dict__["prefix"], lost.__dict__["held_lost"]) == ("p1", 3)
    assert (lost.__dict__["lost_mark"], lost.__dict__["mark"]) == ("m1", "m2")
    unregister()
    mark.mark = "m3"  # and again: a second loss is a second report
    mark._epoch = "m3"
    report.observe()
    second = records(caplog, "jobs.store.lost")[1:]
    assert [(r.__dict__["lost_mark"], r.__dict__["held_lost"]) for r in second] == [("m2", 0)]


async def test_a_mark_that_cannot_be_read_explains_nothing() -> None:
    mark = HandMark("m1")
    mark.failing = True
    report = StoreLossReport(mark)
    assert not await report.explains(claimed("a", "m1"))
    assert report.lost == set()


def test_the_first_claim_only_learns_the_mark() -> None:
    mark = HandMark("m1")
    report = StoreLossReport(mark)
    report.observe()
    report.observe()
    assert report.lost == set()
