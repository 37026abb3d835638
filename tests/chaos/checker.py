"""The core checks after a storm, from ``x_jobs`` and the ledger (``tests.chaos.storm_app``).

* ``lost``: an acknowledged enqueue with no row; ``stuck``: a row not settled after the drain
  (but one due in the last seconds: the scheduler fires on);
  ``dead``: a row that exhausted its attempts; ``done_without_end``: done, but its body never
  recorded its end.
* ``completed_twice``: settlements to ``done`` beyond one a job (the ``done`` counter the ack
  bumps in its own statement, against the rows that are done).
* ``bodies_ended_twice``: a body that ran to its END more than once — its tail outside any step
  re-ran (at-least-once: a kill, freeze or restart between the end and the ack); the steps'
  effects are what is promised once. ``..._unexplained``: with no such disruption.
* ``steps_rerun``: a step's effect recorded more than once; ``steps_rerun_unexplained``: of
  those, the ones whose first effect was NOT by a process the storm killed or froze and not
  across a Postgres restart (the only interruptions that may re-run a step).
* ``p99_pickup_ms_during_storm``: from the enqueue (the input's ``at_ms``) to step ``a``.

The hostile traffic's (``check_hostile``, ``participants/hostile.py``):

* ``stream_messages_unsettled``: a hostile JetStream message (stored: its publish was acked)
  neither landed (a row under the id the consumer derives from its ``Nats-Msg-Id``) nor
  refused on ``ujobs.rejected.<job>`` by the end: a message redelivered forever, or dropped.
* ``answers_5xx``: an answer to hostile traffic that is a 5xx or ``X_INTERNAL`` — an HTTP
  status, a NATS reply's code, a refusal's code — but the transient 503s every caller may meet
  while the storm restarts Postgres or drains an api (``TRANSIENT_CODES``, with
  ``Retry-After``): hostile input is bad input, a 4xx.
* ``revoked_accepted``: a request or stream message carrying a revoked token that was answered
  with a job id or landed.

``ZERO_FIGURES``: what must be 0 for a storm to pass (``tests/chaos/test_storm.py``,
``bench/storm.py``'s ``pass``).
"""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from ujobs.services.api.common import TRANSIENT_CODES, status_for

SETTLED = ("done", "failed", "dead", "cancelled")
SAMPLE = 10
ZERO_FIGURES = (
    "lost",
    "stuck",
    "dead",
    "done_without_end",
    "completed_twice",
    "bodies_ended_twice_unexplained",
    "steps_rerun_unexplained",
    "outbox_lost",
    "outbox_doubled",
    "occurrences_missed",
    "occurrences_doubled",
    "settlements_lost",
    "webhook_lost",
    "webhook_deliveries_lost",
    "webhook_ledger_double_counted",
    "webhook_signatures_invalid",
    "export_parts_corrupt",
    "stream_messages_unsettled",
    "answers_5xx",
    "revoked_accepted",
)


@dataclass
class Disruptions:
    """What the storm did, for telling an allowed re-run from a finding."""

    killed_pids: set[int] = field(default_factory=set)
    stopped_pids: set[int] = field(default_factory=set)
    """Ever frozen (for explaining a re-run); ``frozen``: frozen now (not a kill's victim)."""
    frozen: set[int] = field(default_factory=set)
    restarts_ms: list[tuple[int, int]] = field(default_factory=list)
    kills: int = 0
    stops: int = 0

    def explains(self, first_pid: int, first_ms: int, second_ms: int) -> bool:
        if first_pid in self.killed_pids or first_pid in self.stopped_pids:
            return True
        return any(start <= second_ms and end >= first_ms for start, end in self.restarts_ms)


def percentile(values: list[int], q: float) -> int | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ended_twice_explained(ends: list[Any], disruptions: Disruptions) -> bool:
    """Either runner may be the disrupted one: killed between its end and its ack (it ended
    first), or frozen past its lease and ending its body after the other did (it ended
    second)."""
    first, again = ends[0], ends[1]
    return disruptions.explains(first["pid"], first["at_ms"], again["at_ms"]) or (
        again["pid"] in disruptions.stopped_pids
    )


def check_core(
    jobs: list[Any],
    ledger: list[Any],
    acked: dict[str, list[str]],
    disruptions: Disruptions,
    done_counted: dict[str, int],
) -> dict[str, Any]:
    """``jobs``: rows (id, name, state, input, fresh) of the storm's jobs; ``ledger``: rows (job_id,
    step, attempt, pid, at_ms) in time order; ``acked``: job ids answered, by source;
    ``done_counted``: the ``done`` counter's total by job name."""
    by_id = {r["id"]: r for r in jobs}
    lost = [job_id for ids in acked.values() for job_id in ids if job_id not in by_id]
    stuck = [r["id"] for r in jobs if r["state"] not in SETTLED and not r["fresh"]]
    dead = [r["id"] for r in jobs if r["state"] in ("failed", "dead")]
    effects: dict[tuple[str, str], list[Any]] = defaultdict(list)
    for row in ledger:
        effects[(row["job_id"], row["step"])].append(row)
    ends = {job_id: rows for (job_id, step), rows in effects.items() if step == "end"}
    twice = sorted(job_id for job_id, rows in ends.items() if len(rows) > 1)
    without_end = [
        r["id"]
        for r in jobs
        if r["name"] == "storm.work" and r["state"] == "done" and r["id"] not in ends
    ]
    done_rows: dict[str, int] = defaultdict(int)
    for r in jobs:
        if r["state"] == "done":
            done_rows[r["name"]] += 1
    settled_twice = {
        name: counted - done_rows[name]
        for name, counted in done_counted.items()
        if counted != done_rows[name]
    }
    rerun = unexplained = 0
    unexplained_ids: list[str] = []
    for (job_id, step), rows in effects.items():
        if step == "end":
            continue
        for first, again in itertools.pairwise(rows):
            rerun += 1
            if not disruptions.explains(first["pid"], first["at_ms"], again["at_ms"]):
                unexplained += 1
                unexplained_ids.append(f"{job_id}/{step}")
    pickups = []
    for (job_id, step), rows in effects.items():
        job = by_id.get(job_id)
        if step == "a" and job is not None:
            data = job["input"]
            data = json.loads(data) if isinstance(data, str) else data
            pickups.append(rows[0]["at_ms"] - int(data["at_ms"]))
    return {
        "jobs": len(jobs),
        "lost": len(lost),
        "lost_ids": lost[:SAMPLE],
        "stuck": len(stuck),
        "stuck_ids": stuck[:SAMPLE],
        "dead": len(dead),
        "done_without_end": len(without_end),
        "completed_twice": sum(max(0, n) for n in settled_twice.values()),
        "done_counter_minus_rows": settled_twice,
        "bodies_ended_twice": len(twice),
        "bodies_ended_twice_unexplained": sum(
            1 for job_id in twice if not _ended_twice_explained(ends[job_id], disruptions)
        ),
        "bodies_ended_twice_ids": [
            {
                "id": job_id,
                "ends": [(r["attempt"], r["pid"]) for r in ends[job_id]],
                "explained": _ended_twice_explained(ends[job_id], disruptions),
            }
            for job_id in twice[:SAMPLE]
        ],
        "steps_rerun": rerun,
        "steps_rerun_unexplained": unexplained,
        "steps_rerun_unexplained_ids": unexplained_ids[:SAMPLE],
        "p99_pickup_ms_during_storm": percentile(pickups, 0.99),
        "p50_pickup_ms_during_storm": percentile(pickups, 0.50),
    }


def server_error(status: int, code: str | None) -> bool:
    """Whether an answer to hostile traffic is a finding: a 5xx (or a code that travels as
    one) that is not a transient 503, or ``X_INTERNAL`` whatever its status."""
    if code == "X_INTERNAL":
        return True
    if code in TRANSIENT_CODES:
        return False
    return status >= 500 or (code is not None and status_for(code) >= 500)


def check_hostile(
    published: Mapping[str, str],
    refused: Mapping[str, str],
    landed: Collection[str],
    answers: Mapping[str, int],
    server_errors: list[str],
    revoked: Collection[str],
    revoked_answered: list[str],
) -> dict[str, Any]:
    """``published``: kind of each hostile stream message by ``Nats-Msg-Id`` (stored ones);
    ``refused``: the code each was refused with, by ``Nats-Msg-Id``; ``landed``: the message
    ids whose row exists; ``answers``: every answer by channel, kind and status or code;
    ``server_errors``: the answers that were findings (``server_error``) as they came;
    ``revoked``: the message ids sent with a revoked token; ``revoked_answered``: requests with
    a revoked token answered with a job id."""
    unsettled = [m for m in published if m not in refused and m not in landed]
    refused_5xx = [
        f"stream {published[m]} refused {code}"
        for m, code in refused.items()
        if m in published and server_error(status_for(code), code)
    ]
    errors = server_errors + refused_5xx
    accepted = revoked_answered + [f"stream {m} landed" for m in revoked if m in landed]
    return {
        "hostile_answers": dict(sorted(answers.items())),
        "hostile_stream_published": len(published),
        "hostile_stream_refused": sum(1 for m in published if m in refused),
        "stream_messages_unsettled": len(unsettled),
        "stream_messages_unsettled_kinds": sorted({published[m] for m in unsettled}),
        "answers_5xx": len(errors),
        "answers_5xx_sample": errors[:SAMPLE],
        "revoked_accepted": len(accepted),
        "revoked_accepted_sample": accepted[:SAMPLE],
    }
