"""What a job body receives (``Run``) and what ``on_settled`` is told (``Settled``).

Kept apart from the step runner and the executor so a declaration can name these types
without importing the machinery that builds them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Generic, Literal, NoReturn, Protocol, TypeVar, overload

from ujobs.durations import Duration
from ujobs.execution.frozen_init import slot_init
from ujobs.jobs.snooze import Snooze
from ujobs.signal import Signal

if TYPE_CHECKING:
    from ujobs.drivers.records import EnqueueRequest

InputT = TypeVar("InputT")
R = TypeVar("R")

JSONValue = Any
StepFn = Callable[[Signal], Awaitable[R] | R]
Match = dict[str, Any] | Callable[[Any], bool]


class ChildJob(Protocol):
    """What ``run.step.enqueue`` needs of a job handle (``ujobs.jobs.job.JobHandle``)."""

    @property
    def name(self) -> str: ...

    def request(
        self,
        input: Any = None,
        *,
        job_id: str | None = None,
        delay: Duration | None = None,
        queue: str | None = None,
        idempotency_key: str | None = None,
        priority: int | None = None,
    ) -> EnqueueRequest: ...


class StepApi(Protocol):
    """``run.step``: durable steps. Names are the replay key: deterministic, unique per run."""

    # Two signatures so a type checker solves R for an async fn (its awaited result) as for a
    # plain one: against ``Awaitable[R] | R`` alone it could not, and flagged every call.
    @overload
    async def run(self, name: str, fn: Callable[[Signal], Awaitable[R]]) -> R: ...
    @overload
    async def run(self, name: str, fn: Callable[[Signal], R]) -> R: ...
    async def run(self, name: str, fn: StepFn[R]) -> R:
        """Run ``fn`` once ever; its result is stored before the next step starts."""
        ...

    async def sleep(
        self, name_or_duration: str | int | timedelta, duration: str | int | timedelta | None = None
    ) -> None:
        """Suspend the run and requeue it at the wake time; holds no process."""
        ...

    async def wait_for_event(
        self,
        name: str,
        event: str,
        *,
        match: Match | None = None,
        timeout: str | int | timedelta | None = None,
    ) -> JSONValue:
        """Suspend until ``publish_event(event, payload)`` matches; answers the payload."""
        ...

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
        """Enqueue ``job`` as this run's child, once ever (a step); answers the child's id.
        ``priority`` (0 first to 9) overrides the child job's declared one."""
        ...

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
        """Enqueue one child per input as ONE step (one statement per 1,000); their ids."""
        ...

    async def wait(
        self, child: str, *, timeout: Duration | None = None, step: str | None = None
    ) -> JSONValue:
        """Suspend until the child settles (no process held); its result, or raises
        ``X_CHILD_FAILED`` with the child's failure as the cause."""
        ...

    async def gather(
        self, children: Sequence[str], *, timeout: Duration | None = None, step: str | None = None
    ) -> list[JSONValue]:
        """``wait`` for many children at once (one suspension, one wake); results in order."""
        ...


ProgressFn = Callable[..., None]


@slot_init  # one per attempt: see ujobs.execution.frozen_init
@dataclass(frozen=True, slots=True)
class Run(Generic[InputT]):
    """One attempt of one job, as its body sees it."""

    input: InputT
    step: StepApi
    ctx: Any
    attempt: int
    final_attempt: bool
    job_id: str
    run_id: str
    signal: Signal
    progress: ProgressFn
    name: str = ""
    queue: str = "default"
    tenant_id: str | None = None

    def snooze(self, seconds: float | timedelta) -> NoReturn:
        """Run again in ``seconds`` without spending an attempt: ``raise Snooze(seconds)``
        (``ujobs.jobs.snooze``)."""
        raise Snooze(seconds)


SettledOutcome = Literal["completed", "dead-lettered", "dropped", "refused"]


@dataclass(frozen=True, slots=True)
class Settled(Generic[InputT]):
    """How a run ENDED, told once to ``on_settled`` after the row is settled.

    ``input`` is None when the stored payload no longer parses; ``result`` is what the body
    returned (``completed`` only), never stored; ``code`` is the thrown error's code, None for
    a lease that lapsed on its final attempt (nothing was thrown).
    """

    outcome: SettledOutcome
    job_id: str
    run_id: str
    name: str
    attempt: int
    input: InputT | None
    ctx: Any
    result: Any = None
    error: BaseException | str | None = None
    code: str | None = None


OnSettled = Callable[[Settled[Any]], Awaitable[None]]
