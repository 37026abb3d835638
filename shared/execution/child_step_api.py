"""The children's half of ``run.step`` (``Step`` inherits it): ``enqueue``, ``enqueue_many``,
``wait`` and ``gather``, each a thin call into ``ujobs.execution.child_steps``, which holds
their rules. Kept apart so the step runner's module stays about the replay itself."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from ujobs.durations import Duration
from ujobs.execution.child_steps import (
    checked_ids,
    enqueue_child,
    enqueue_children,
    gather_name,
    wait_children,
)
from ujobs.execution.run import ChildJob, JSONValue

if TYPE_CHECKING:
    from ujobs.execution.steps import Step


class ChildStepApi:
    """``run.step.enqueue`` / ``enqueue_many`` / ``wait`` / ``gather``, on the step runner."""

    _enqueues: dict[str, int]

    def default_enqueue_name(self, job: str, *, many: bool = False) -> str:
        """``'enqueue:<job>#<n>'`` (``enqueue_many:`` for a batch): the n-th unnamed one of
        ``job`` in this attempt."""
        kind = "enqueue_many" if many else "enqueue"
        n = self._enqueues.get(f"{kind}:{job}", 0) + 1
        self._enqueues[f"{kind}:{job}"] = n
        return f"{kind}:{job}#{n}"

    async def enqueue(
        self,
        job: ChildJob,
        input: Any = None,
        *,
        step: str | None = None,
        detached: bool = False,
        delay: Duration | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> str:
        """Enqueue ``job`` as this run's child, once ever; answers the child's id."""
        return await enqueue_child(
            cast("Step", self),
            job,
            input,
            name=step,
            detached=detached,
            delay=delay,
            queue=queue,
            priority=priority,
        )

    async def enqueue_many(
        self,
        job: ChildJob,
        inputs: Sequence[Any],
        *,
        step: str | None = None,
        detached: bool = False,
        delay: Duration | None = None,
        queue: str | None = None,
        priority: int | None = None,
    ) -> list[str]:
        """Enqueue one child of ``job`` per input, once ever, as ONE step; their ids in order."""
        return await enqueue_children(
            cast("Step", self),
            job,
            inputs,
            name=step,
            detached=detached,
            delay=delay,
            queue=queue,
            priority=priority,
        )

    async def wait(
        self, child: str, *, timeout: Duration | None = None, step: str | None = None
    ) -> JSONValue:
        """Park until the child settles; its result, or ``X_CHILD_FAILED``."""
        ids = checked_ids([child])
        [result] = await wait_children(
            cast("Step", self), ids, name=step or f"wait:{child}", timeout=timeout
        )
        return result

    async def gather(
        self, children: Sequence[str], *, timeout: Duration | None = None, step: str | None = None
    ) -> list[JSONValue]:
        """Park until every child settles (one wake); their results in order."""
        ids = checked_ids(children)
        return await wait_children(
            cast("Step", self), ids, name=step or gather_name(ids), timeout=timeout
        )


__all__ = ["ChildStepApi"]
