"""``/batch`` under ``"onConflict": "error"``: every input a new job, or none (Postgres only).

The default batch dedupes input by input: a live run holding an input's key answers that input
(``deduped``) while the others are inserted. Under ``onConflict: error`` a conflict must refuse
the whole batch with nothing queued, which a dedupe cannot undo afterwards (the other rows are
committed and a worker may already hold them). So the batch goes to the Postgres driver's
``enqueue_many_new``: one statement that inserts every row only when no input is held, and
fails whole when a concurrent enqueue takes a key under it. A job driver elsewhere (Redis) has
no such statement: ``strict_batch`` answers None and the route refuses the mode (501).
"""

from __future__ import annotations

from collections.abc import Sequence

from ujobs.drivers.base import Enqueued, EnqueueRequest, JobDriver
from ujobs.drivers.postgres.driver import PostgresDriver
from ujobs.wake.announce import AnnouncingDriver
from ujobs.wake.protocol import WAKE_DUE_WITHIN_MS


class StrictBatch:
    """All-or-none batches on the Postgres driver, announced like the api's other enqueues."""

    def __init__(self, driver: PostgresDriver, announcing: AnnouncingDriver) -> None:
        self.driver = driver
        self.announcing = announcing

    async def enqueue(self, requests: Sequence[EnqueueRequest]) -> list[Enqueued]:
        """Every request as a new row, or ``X_JOB_DUPLICATE`` (``meta.conflicts``) and none."""
        answers = await self.driver.enqueue_many_new(requests)
        due_by = self.driver.clock.now_ms() + WAKE_DUE_WITHIN_MS
        due = (r.queue for r in requests if r.run_at_ms is None or r.run_at_ms <= due_by)
        for queue in dict.fromkeys(due):
            self.announcing.announce(queue)
        return answers


def strict_batch(inner: JobDriver, announcing: AnnouncingDriver) -> StrictBatch | None:
    """The strict batch when the jobs are on the Postgres driver (``inner``), else None."""
    return StrictBatch(inner, announcing) if isinstance(inner, PostgresDriver) else None


__all__ = ["StrictBatch", "strict_batch"]
