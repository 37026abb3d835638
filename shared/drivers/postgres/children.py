"""The Postgres driver's children (``ujobs.drivers.children``): a child inserted with its
parent (``children_enqueue.sql``), the wait's mark (``children_mark.sql``) and read
(``children_read.sql``), and the job page's list (``children_list.sql``). The settles that
finish a marked child wake its parent in their own statements (ack.sql, nack.sql and their
settlements twins); the cancel's cascade is cancel_job.sql's."""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Sequence
from typing import Any

from ujobs.drivers.base import (
    MAX_BULK_ROWS,
    Enqueued,
    EnqueueRequest,
    JobRow,
    check_enqueue_request,
)
from ujobs.drivers.children import ChildPage, ChildSummary, ChildTally
from ujobs.drivers.postgres.deadlock_retry import retry_deadlock
from ujobs.drivers.postgres.enqueue import ENQUEUE_RETRIES, PostgresEnqueuer, wake_slot
from ujobs.drivers.postgres.enqueue_rows import StampedJob
from ujobs.drivers.postgres.held_connections import HeldConnections
from ujobs.drivers.postgres.rows import job_row, job_state
from ujobs.drivers.postgres.sql import query
from ujobs.errors import InvariantError

_ENQUEUE = query("children_enqueue")
_ENQUEUE_MANY = query("children_enqueue_many")
_MARK = query("children_mark")
_READ = query("children_read")
_LIST = query("children_list")

MARK_ROUNDS = 50
MARK_PAUSE_S = 0.002

# Which named statements each JobChildren operation runs (tests/integration prove the map).
OPERATION_QUERIES: dict[str, tuple[str, ...]] = {
    "enqueue": ("children_enqueue",),
    "enqueue_many": ("children_enqueue_many",),
    "mark": ("children_mark",),
    "read": ("children_read",),
    "list": ("children_list",),
}


class PostgresChildren:
    def __init__(self, conns: HeldConnections, enqueuer: PostgresEnqueuer) -> None:
        self._conns = conns
        self._enqueuer = enqueuer

    async def _fetch(self, sql: str, *args: Any) -> builtins.list[Any]:
        return await self._conns.run(lambda conn: conn.fetch(sql, *args))

    async def enqueue(
        self, request: EnqueueRequest, *, parent_id: str, detached: bool
    ) -> Enqueued | None:
        check_enqueue_request(request)
        stamped = StampedJob(request)
        for _ in range(ENQUEUE_RETRIES):
            args = stamped.at(self._enqueuer.clock.now_ms())
            slot = wake_slot(args[8], args[9])
            rows = await self._fetch(_ENQUEUE, *args, slot, parent_id, detached, request.priority)
            if rows:
                row = rows[0]
                if row["id"] is None:
                    return None
                return Enqueued(row["id"], row["run_id"], row["deduped"])
        raise InvariantError(
            "a child's enqueue kept meeting a concurrent enqueue of the same id or key; retry",
            meta={"name": request.name, "id": stamped.job_id},
        )

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, parent_id: str, detached: bool
    ) -> builtins.list[str] | None:
        if len(requests) > MAX_BULK_ROWS:
            raise InvariantError(
                f"at most {MAX_BULK_ROWS} children in one enqueue_many",
                meta={"count": len(requests)},
            )
        for request in requests:
            check_enqueue_request(request)
            if request.id is None or request.run_id is None:
                raise InvariantError("a child of a batch carries its own id and run id")
        stamped = [StampedJob(r) for r in requests]
        now = self._enqueuer.clock.now_ms()
        args = [s.at(now) for s in stamped]
        columns = [[a[i] for a in args] for i in (0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11)]
        priorities = [r.priority for r in requests]
        [row] = await self._fetch(_ENQUEUE_MANY, parent_id, detached, now, *columns, priorities)
        if not row["parent"]:
            return None
        return [s.job_id for s in stamped]

    async def mark(self, parent_id: str, child_ids: Sequence[str]) -> ChildTally:
        # The mark skips the children a claim or a settle holds (children_mark.sql) and marks
        # them a moment later; past MARK_ROUNDS the parent's poll is the net for the rest.
        ids = list(child_ids)
        for _ in range(MARK_ROUNDS):
            [row] = await retry_deadlock(self._fetch, _MARK, parent_id, ids)
            if not row["busy"]:
                break
            await asyncio.sleep(MARK_PAUSE_S)
        return ChildTally(row["found"], row["live"], row["ended_badly"])

    async def read(self, parent_id: str, child_ids: Sequence[str]) -> builtins.list[JobRow]:
        return [job_row(r) for r in await self._fetch(_READ, parent_id, list(child_ids))]

    async def list(self, parent_id: str, *, limit: int) -> ChildPage:
        rows = await self._fetch(_LIST, parent_id, limit)
        return ChildPage(
            [
                ChildSummary(r["id"], r["name"], job_state(r["id"], r["state"]), r["created_at_ms"])
                for r in rows
            ],
            rows[0]["total"] if rows else 0,
        )


__all__ = ["OPERATION_QUERIES", "PostgresChildren"]
