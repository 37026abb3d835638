"""A store that came back empty under a live worker: ONE error naming it, not a warning per row.

A Redis restarted without persistence loses the whole deployment (every row, step, dedupe key
and counter). A worker holding rows then meets it row by row: renewals answer "not ours", step
writes and settles are refused — each of which, alone, means a lapsed lease and is reported per
row (``jobs.lease.lost``, ``jobs.settle.unowned``, ``X_JOB_LEASE_LOST``). On a driver with a
``store_watch`` (``ujobs.drivers.keyspace``) those refusals are first checked against the
keyspace mark: a row claimed under a mark that is no longer there is explained by the loss, and
the loss is logged ONCE per process, as an error::

    jobs.store.lost  prefix=<deployment prefix>  held_lost=<rows this process was running>
                     lost_mark=<the old mark>  mark=<the new one>

The per-row lines it explains drop to debug. A claim that reads a new mark (the worker was idle,
or its rows are not refused yet) reports it the same way, once. The check costs nothing on the
hot path: a refusal reads the mark (one round trip, shared by the refusals on the wire together)
only when the row's mark is still the one this process knows.

One ``StoreLossReport`` per keyspace mark, i.e. per driver: the workers on that driver register
how many of their running rows were claimed under a mark (``count_held``).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable

from ujobs.drivers.base import ClaimedJob, JobDriver, StoreWatch

log = logging.getLogger("ujobs.jobs")

HeldCount = Callable[[str], int]
"""How many rows a worker is running that were claimed under the given mark."""

STORE_LOST_REASON = "store-lost"
"""``meta.reason`` of the ``X_JOB_LEASE_LOST`` an attempt gets when the loss explains it."""


class StoreLossReport:
    """Tells a refusal explained by a wiped keyspace, and reports each loss once."""

    def __init__(self, watch: StoreWatch) -> None:
        self.watch = watch
        self.lost: set[str] = set()
        self._seen: str | None = None
        self._held: list[HeldCount] = []

    def count_held(self, counter: HeldCount) -> Callable[[], None]:
        """Count a worker's running rows into the report; answers the unregister."""
        self._held.append(counter)
        return lambda: self._held.remove(counter) if counter in self._held else None

    def observe(self) -> None:
        """After a claim: a mark other than the one seen last is a loss (reported once)."""
        current = self.watch.epoch
        previous, self._seen = self._seen, current
        if previous is not None and current is not None and current != previous:
            self._report(previous, current)

    async def explains(self, claimed: ClaimedJob) -> bool:
        """The store refused ``claimed`` (a renewal, a step, a settle): is it because the
        keyspace it was claimed in is gone? Reads the mark only when this process has not
        already seen it change; a mark that cannot be read explains nothing."""
        epoch = claimed.store_epoch
        if epoch is None:
            return False
        if epoch in self.lost:
            return True
        current = self.watch.epoch
        if current == epoch:
            try:
                current = await self.watch.verify()
            except Exception:
                return False
        if current is None or current == epoch:
            return False
        self._report(epoch, current)
        return True

    def _report(self, lost: str, current: str) -> None:
        if lost in self.lost:
            return
        self.lost.add(lost)
        log.error(
            "jobs.store.lost",
            extra={
                "prefix": self.watch.prefix,
                "held_lost": sum(count(lost) for count in self._held),
                "lost_mark": lost,
                "mark": current,
                "hint": "the store came back without this deployment's keys (a Redis restarted "
                "without persistence?): every job enqueued before it is gone; run the queue's "
                "Redis with appendonly yes (docs/guides/operations.md: Redis durability)",
            },
        )


_REPORTS: weakref.WeakKeyDictionary[StoreWatch, StoreLossReport] = weakref.WeakKeyDictionary()


def store_loss_report(driver: JobDriver) -> StoreLossReport | None:
    """The report of ``driver``'s keyspace mark; None for a store that never comes back empty."""
    watch = driver.store_watch
    if watch is None:
        return None
    report = _REPORTS.get(watch)
    if report is None:
        report = _REPORTS[watch] = StoreLossReport(watch)
    return report


async def store_lost(driver: JobDriver, claimed: ClaimedJob) -> bool:
    """A refusal of ``claimed`` is explained by its keyspace being wiped (reported once)."""
    if claimed.store_epoch is None:
        return False
    report = store_loss_report(driver)
    return report is not None and await report.explains(claimed)


__all__ = [
    "STORE_LOST_REASON",
    "StoreLossReport",
    "store_loss_report",
    "store_lost",
]
