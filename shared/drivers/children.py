"""Children: the driver's ``children`` capability (``run.step.enqueue`` / ``wait`` / ``gather``).

A child is an ordinary job row that records the job that enqueued it (``parent_id``). What a
driver must do for a parent to wait on its children without holding a process:

* ``enqueue(request, parent_id=, detached=)`` inserts the child with its parent, deduped on
  the request's id like any enqueue (the step runner derives that id from the parent's run
  and the step's name, so a replay never makes a second child).
* ``enqueue_many(requests, parent_id=, detached=)`` the same for a batch, one operation
  (``run.step.enqueue_many``: a fan-out of a thousand children is one statement, not a
  thousand).
* A child is BORN waited for: the enqueue marks it (``parent_waits``) and counts it on its
  parent (``children_waited``) in its own statement, since almost every child is gathered; a
  child nobody waits for costs its parent at most a spurious wake.
* ``mark(parent_id, ids)`` marks the parent's LIVE children among ``ids`` that are not marked
  yet (none, for children enqueued as steps) and adds them to the parent's count; it answers
  a tally (found, live, ended badly), so a wait with children live parks without a read.
  The settle that finishes a marked child
  (done, dead, failed, cancelled) takes one off that count and, at zero, makes a suspended
  parent due now: ONE wake per wait, however many children it gathers. A parent whose count
  reached zero while it still ran is made due at once by its own suspending nack.
* ``read(parent_id, ids)`` the rows among ``ids`` that are children of ``parent_id``, with
  their results: an id that is not this parent's child (another tenant's job included) is
  simply absent, so it answers exactly as a missing job.
* ``list(parent_id, limit)`` the first children and how many there are (the job page).

A cancel of a parent cancels its live descendants unless they were enqueued detached
(``JobIntrospection.cancel``). Redis has no such index of rows and no ``children``: the step
runner refuses there with ``X_DRIVER_UNSUPPORTED``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ujobs.drivers.operator_surface import JobRow
from ujobs.drivers.records import Enqueued, EnqueueRequest, JobState

MAX_CHILDREN_LISTED = 50
"""The most children a job page lists (its count is always complete)."""
MAX_WAITED_CHILDREN = 10_000
"""The most children one ``wait``/``gather`` takes (one statement marks and reads them)."""


@dataclass(frozen=True, slots=True)
class ChildSummary:
    """One line of a parent's list of children."""

    id: str
    name: str
    state: JobState
    created_at_ms: int


@dataclass(frozen=True, slots=True)
class ChildPage:
    """The first children of a job, in the order they were enqueued, and how many it has."""

    children: list[ChildSummary]
    total: int


@dataclass(frozen=True, slots=True)
class ChildTally:
    """How the ids a wait marked stood: how many are the parent's children (``found``), how
    many of them are live, how many ended dead, failed or cancelled."""

    found: int
    live: int
    ended_badly: int


@runtime_checkable
class JobChildren(Protocol):
    """What a driver offers a parent (``driver.children``; None: no children)."""

    async def enqueue(
        self, request: EnqueueRequest, *, parent_id: str, detached: bool
    ) -> Enqueued | None:
        """The child inserted with its parent, or the row holding its id or live key
        (deduped); None when there is no row ``parent_id``."""
        ...

    async def enqueue_many(
        self, requests: Sequence[EnqueueRequest], *, parent_id: str, detached: bool
    ) -> list[str] | None:
        """Every request inserted as a child of ``parent_id`` in one operation (each carries
        its id: one already taken is answered as it is); the ids in order, or None when there is
        no row ``parent_id`` (nothing inserted). At most ``MAX_BULK_ROWS`` requests."""
        ...

    async def mark(self, parent_id: str, child_ids: Sequence[str]) -> ChildTally:
        """Mark the parent's live children among ``child_ids`` waited for (module docstring);
        answers how they stood once marked."""
        ...

    async def read(self, parent_id: str, child_ids: Sequence[str]) -> list[JobRow]:
        """The rows among ``child_ids`` whose parent is ``parent_id``, in no particular order."""
        ...

    async def list(self, parent_id: str, *, limit: int) -> ChildPage:
        """The first ``limit`` children of ``parent_id`` and the count of all of them."""
        ...


@runtime_checkable
class WakesParents(Protocol):
    """A driver whose settles make a waiting parent due (its last child ended) and say so: it
    tells this process's workers itself, and ``announcing()`` registers the publish to other
    processes here."""

    def on_parent_woken(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(queue)`` for every parent a settle makes due."""
        ...


def children_of(driver: object) -> JobChildren | None:
    """The driver's ``children`` capability (seen through any wrapper), or None."""
    children = getattr(driver, "children", None)
    return children if isinstance(children, JobChildren) else None


__all__ = [
    "MAX_CHILDREN_LISTED",
    "MAX_WAITED_CHILDREN",
    "ChildPage",
    "ChildSummary",
    "ChildTally",
    "JobChildren",
    "WakesParents",
    "children_of",
]
