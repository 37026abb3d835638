"""How an attempt ended: the outcome table of § The deadline cancels, in ONE place.

``execute_job`` (and the worker's two other settles, ``refuse_job`` and ``hand_back``) answer a
``JobExecution``; the worker reads ``jobs_total`` off it for the metric, ``resume_at_ms`` for
its short timer, and ``settled`` to know whether any of it happened at all.

| The attempt ended by | outcome | attempt counted | jobs_total | on_settled |
|---|---|---|---|---|
| the body returning | completed | — | ok | told |
| step.sleep / step.wait_for_event | suspended | no | — | no |
| the body throwing, attempts left | retried | yes | failed | no |
| the body throwing, none left or terminal | dead-lettered | yes | dead | told |
| the same, retry.dead_letter=False | dropped (row failed) | yes | failed | told |
| the worker's drain (X_DRAINING) | interrupted | no | — | no |
| ``raise Snooze(seconds)`` (under ``MAX_SNOOZES``) | snoozed | no | — | no |
| when_busy='fail' over a busy key | refused (row failed) | no | failed | told |
| a shed, a limit, an unknown job name | handed-back (not in the spec's table) | no | — | no |
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.errors import UltimateError
from ujobs.execution.frozen_init import slot_init
from ujobs.jobs.retry import StopReason

JobOutcome = Literal[
    "completed",
    "suspended",
    "retried",
    "dead-lettered",
    "dropped",
    "interrupted",
    "refused",
    "snoozed",
]
ExecutionOutcome = JobOutcome | Literal["handed-back"]
JobsTotal = Literal["ok", "failed", "dead"]


@dataclass(frozen=True, slots=True)
class OutcomeRule:
    """One row of the table: is the attempt counted, which ``jobs_total`` label, is the
    ``on_settled`` hook told (only a run that ENDED is)."""

    attempt_counted: bool | None
    jobs_total: JobsTotal | None
    tells_on_settled: bool


OUTCOMES: Mapping[ExecutionOutcome, OutcomeRule] = {
    "completed": OutcomeRule(None, "ok", True),
    "suspended": OutcomeRule(False, None, False),
    "retried": OutcomeRule(True, "failed", False),
    "dead-lettered": OutcomeRule(True, "dead", True),
    "dropped": OutcomeRule(True, "failed", True),
    "interrupted": OutcomeRule(False, None, False),
    "refused": OutcomeRule(False, "failed", True),
    "snoozed": OutcomeRule(False, None, False),
    "handed-back": OutcomeRule(False, None, False),
}


@slot_init  # one per attempt: see ujobs.execution.frozen_init
@dataclass(frozen=True, slots=True)
class JobExecution:
    """What one attempt did.

    ``outcome`` is what the attempt ASKED the queue for; ``settled`` says whether the ack/nack
    landed (False: the claim was no longer ours — ``jobs.settle.unowned`` — or the driver
    failed). Count metrics only for settled executions. ``resume_at_ms`` is when a suspended,
    retried, interrupted or handed-back row is due again. ``result`` is the body's return value
    itself, never serialised. ``on_settled_error`` is ``X_JOB_ON_SETTLED_FAILED`` when the hook
    threw on every try; it changes nothing else here. ``abandoned`` is True when the body was
    still running at the settle (it ignored the deadline or a lost lease).
    """

    outcome: ExecutionOutcome
    job_id: str
    run_id: str
    name: str
    queue: str
    attempt: int
    settled: bool
    duration_ms: int
    stop_reason: StopReason | None = None
    resume_at_ms: int | None = None
    result: Any = None
    error: BaseException | None = None
    code: str | None = None
    on_settled_error: UltimateError | None = None
    abandoned: bool = False

    @property
    def attempt_counted(self) -> bool | None:
        return OUTCOMES[self.outcome].attempt_counted

    @property
    def jobs_total(self) -> JobsTotal | None:
        """The ``jobs_total{outcome}`` label to count — None when nothing is counted (also when
        the settle did not land: another claim owns that row's ending)."""
        if not self.settled:
            return None
        return OUTCOMES[self.outcome].jobs_total


MAX_CHAINED_ERRORS = 64
"""How many errors of one chain (``__cause__`` and ``__context__``, followed both ways)
``release_frames`` visits at most."""


def release_frames(error: BaseException | None) -> None:
    """Clear the local variables of the frames ``error``'s traceback holds, and its causes'
    and contexts': the file, line and function of each frame stay, so the traceback still
    prints, but what the body held when it raised (a payload, a buffer, a dataframe) is let go.
    The worker calls it once a run is settled and its error logged, before keeping the
    execution in its recent history; a frame still running is left as it is."""
    todo = [error] if error is not None else []
    seen: set[int] = set()
    while todo and len(seen) < MAX_CHAINED_ERRORS:
        current = todo.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            try:
                tb.tb_frame.clear()
            except RuntimeError:  # a frame still executing (a caller up the stack)
                pass
            tb = tb.tb_next
        todo.extend(e for e in (current.__cause__, current.__context__) if e is not None)
