"""The memory driver's children (``ujobs.drivers.children``), over the one ``MemoryState``: the
finish hook there takes a marked child off its parent's count and wakes the parent at zero, and
the operator cancel walks the descendants (``MemoryState.descendants``)."""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

from ujobs.clock import Clock
from ujobs.drivers.base import LIVE_STATES, Enqueued, EnqueueRequest, JobRow, check_enqueue_request
from ujobs.drivers.children import ChildPage, ChildSummary, ChildTally
from ujobs.drivers.memory.state import MemoryState

Insert = Callable[[EnqueueRequest, int], Enqueued]


class MemoryChildren:
    def __init__(self, state: MemoryState, clock: Clock, insert: Insert) -> None:
        self._state = state
        self._clock = clock
        self._insert = insert

    async def enqueue(
        self, request: EnqueueRequest, *, parent_id: str, detached: bool
    ) -> Enqueued | None:
        check_enqueue_request(request)
        if parent_id not in self._state.rows:
            return None
        answer = self._insert(request, self._clock.now_ms())
        if not answer.deduped:
            row = self._state.rows[answer.id]
            row.parent_id = parent_id
            row.parent_detached = detached
            # Born waited for and counted on its parent (children_enqueue.sql).
            row.parent_waits = True
            parent = self._state.rows[parent_id]
            parent.children_waited = (parent.children_waited or 0) + 1
        return answer

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, parent_id: str, detached: bool
    ) -> builtins.list[str] | None:
        for request in requests:
            check_enqueue_request(request)
        if parent_id not in self._state.rows:
            return None
        return [
            answer.id
            for answer in [
                await self.enqueue(r, parent_id=parent_id, detached=detached) for r in requests
            ]
            if answer is not None
        ]

    async def mark(self, parent_id: str, child_ids: Sequence[str]) -> ChildTally:
        marked = 0
        for child_id in child_ids:
            row = self._state.rows.get(child_id)
            if (
                row is not None
                and row.parent_id == parent_id
                and row.state in LIVE_STATES
                and not row.parent_waits
            ):
                row.parent_waits = True
                marked += 1
        parent = self._state.rows.get(parent_id)
        if parent is not None and marked:
            parent.children_waited = (parent.children_waited or 0) + marked
        found = [
            row
            for row in (self._state.rows.get(i) for i in dict.fromkeys(child_ids))
            if row is not None and row.parent_id == parent_id
        ]
        return ChildTally(
            len(found),
            sum(r.state in LIVE_STATES for r in found),
            sum(r.state in ("dead", "failed", "cancelled") for r in found),
        )

    async def read(self, parent_id: str, child_ids: Sequence[str]) -> builtins.list[JobRow]:
        rows = (self._state.rows.get(child_id) for child_id in dict.fromkeys(child_ids))
        return [r.view() for r in rows if r is not None and r.parent_id == parent_id]

    async def list(self, parent_id: str, *, limit: int) -> ChildPage:
        children = sorted(
            (r for r in self._state.rows.values() if r.parent_id == parent_id),
            key=lambda r: (r.created_at_ms, r.id),
        )
        return ChildPage(
            [ChildSummary(r.id, r.name, r.state, r.created_at_ms) for r in children[:limit]],
            len(children),
        )


__all__ = ["MemoryChildren"]
