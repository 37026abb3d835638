"""``WorkerOptions``: the worker's settings, validated once, frozen.

A bad value fails at ``job_worker()`` with ``X_INVARIANT`` naming the option — never at the
first claim, and never as a silent "no limit". The defaults are the constants below and the
fields of ``WorkerOptions``; what each option means:

* ``queues`` — the queues served (default: every queue a registered job names). A queue no job
  names is still served (a per-call ``enqueue(queue=)`` may land there).
* ``concurrency`` — slots: an int for every queue, or a table per queue; a queue the table does
  not name gets ``JOBS_CONCURRENCY_DEFAULT``.
* ``max_in_flight`` — the process cap across queues (None: no cap). A whole number >= 1: 0,
  negative, fractional, NaN and Infinity are refused.
* ``visibility_timeout_ms`` — what a claim buys; also the fleet slot's TTL and the registry
  row's.
* ``heartbeat_interval_ms`` — under the window, so two renewals can fail before the lease
  lapses.
* ``poll_interval_ms`` — the wait between passes while there is work; an idle loop doubles it
  up to the ceiling.
* ``idle_poll_max_ms`` — the idle ceiling when declared; else the wake's
  (``ujobs.wake.protocol.idle_ceiling_ms``).
* ``claim_ahead`` — how many rows a worker serving ONE queue may claim beyond its free slots,
  to start the next run without a claim round trip (``ujobs.worker.claim_ahead``; at most
  ``CLAIM_AHEAD_MAX_PER_SLOT`` times the worker's capacity; the buffer holds about 50 ms of the
  worker's pace within that, and never less than three rows a slot). Off unless asked for,
  because a row claimed ahead is one another worker of the fleet cannot take until it runs or
  goes back;
  on short jobs it is the drain's largest lever. A whole number >= 0; ignored on a worker of
  several queues.
* ``fair`` — tenant-fair claims (``ujobs.drivers.fairness``): True (the default) for every
  queue, False for none, or a table ``{queue: False}`` naming the queues served first-in
  first-out (a queue the table does not name stays fair). ``ujobs worker`` reads
  ``UJOBS_STRICT_QUEUES``.
"""

from __future__ import annotations

import math
import os
import socket
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ujobs.errors import InvariantError, JobDeclarationInvalidError
from ujobs.ids import new_id
from ujobs.jobs.job import validate_name
from ujobs.jobs.registry import Registry
from ujobs.worker.limits import LimitConfig

JOBS_CONCURRENCY_DEFAULT = 8
"""The slots of a queue ``concurrency`` does not name."""
DEFAULT_VISIBILITY_TIMEOUT_MS = 30_000
CLAIM_AHEAD_MAX_PER_SLOT = 16
"""``claim_ahead`` is honoured up to this many rows per unit of the worker's capacity. The
buffer fills that far only at a pace that runs it in about 50 ms (``ujobs.worker.claim_ahead``):
while a row waits no other worker of the fleet can take it, so a worker holds no more than it
will start soon."""
CLAIM_AHEAD_FLOOR_PER_SLOT = 3
"""Rows per unit of capacity the buffer keeps room for at any pace (``claim_ahead`` when that
is fewer): a worker of slow jobs claims as it did before the buffer followed the pace."""
DEFAULT_POLL_INTERVAL_MS = 250

Concurrency = int | Mapping[str, int]
Fairness = bool | Mapping[str, bool]


@dataclass(frozen=True, slots=True)
class WorkerOptions:
    """Everything a worker needs besides its driver, context and registry."""

    worker_id: str
    queues: tuple[str, ...]
    concurrency: Mapping[str, int]
    max_in_flight: int | None = None
    limits: LimitConfig | None = None
    visibility_timeout_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS
    heartbeat_interval_ms: int = DEFAULT_VISIBILITY_TIMEOUT_MS // 3
    poll_interval_ms: int = DEFAULT_POLL_INTERVAL_MS
    idle_poll_max_ms: int | None = None
    drain_on_shutdown: bool = True
    close_driver: bool = True
    claim_ahead: int = 0
    strict_queues: frozenset[str] = frozenset()
    """The served queues claimed first-in first-out (``fair=False``); the rest are fair."""

    @property
    def slot_sum(self) -> int:
        return sum(self.concurrency[q] for q in self.queues)

    @property
    def capacity(self) -> int:
        """The most runs this worker holds: the tighter of the cap and the slot sum (what the
        registry row's ``slots`` and the ``job_worker_capacity`` gauge say)."""
        if self.max_in_flight is None:
            return self.slot_sum
        return min(self.max_in_flight, self.slot_sum)


def _refuse(option: str, message: str, value: Any) -> InvariantError:
    return InvariantError(
        f"job_worker({option}=...): {message}, got {value!r}",
        meta={"option": option, "value": repr(value)},
    )


def _whole(option: str, value: Any, *, minimum: int = 1) -> int:
    """A whole number >= ``minimum``; an integral float is accepted, anything else refused."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse(option, f"must be a whole number of at least {minimum}", value)
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        raise _refuse(option, f"must be a whole number of at least {minimum}", value)
    if value < minimum:
        raise _refuse(option, f"must be a whole number of at least {minimum}", value)
    return int(value)


def _queue_names(queues: Iterable[str], option: str) -> tuple[str, ...]:
    if isinstance(queues, str | bytes):
        raise _refuse(option, "must be a list of queue names, not one string", queues)
    names: list[str] = []
    for queue in queues:
        try:
            validate_name(queue, kind="queue")
        except JobDeclarationInvalidError as exc:
            raise _refuse(option, exc.message, queue) from None
        if queue not in names:
            names.append(queue)
    return tuple(names)


def _strict_queues(fair: Fairness, served: tuple[str, ...]) -> frozenset[str]:
    """The served queues ``fair`` turns strict: all (False), none (True), or those a table
    maps to False; a table naming a queue the worker does not serve is refused."""
    if isinstance(fair, bool):
        return frozenset() if fair else frozenset(served)
    if not isinstance(fair, Mapping):
        raise _refuse("fair", "must be True, False or a table {queue: bool}", fair)
    strict: set[str] = set()
    for queue, on in fair.items():
        if not isinstance(on, bool):
            raise _refuse(f"fair[{queue!r}]", "must be True or False", on)
        if queue not in served:
            raise _refuse("fair", f"names {queue!r}, a queue this worker does not serve", fair)
        if not on:
            strict.add(queue)
    return frozenset(strict)


def unregistered_queues(options: WorkerOptions, registry: Registry) -> list[str]:
    """Served queues no registered job names: still polled (a per-call ``enqueue(queue=)`` may
    land there), reported once at start as ``jobs.worker.queue-unregistered``."""
    named = {h.queue for h in registry.jobs.values()}
    return [q for q in options.queues if q not in named]


def default_worker_id() -> str:
    """``<host>:<pid>:<8 hex>`` — readable in ``ujobs jobs workers``, unique per start."""
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()[-8:]}"


def build_options(
    *,
    queues: Iterable[str] | None,
    registered_queues: Iterable[str],
    concurrency: Concurrency,
    max_in_flight: int | None,
    limits: LimitConfig | None,
    visibility_timeout_ms: int,
    heartbeat_interval_ms: int | None,
    poll_interval_ms: int,
    idle_poll_max_ms: int | None,
    drain_on_shutdown: bool,
    close_driver: bool,
    worker_id: str | None,
    claim_ahead: int = 0,
    fair: Fairness = True,
) -> WorkerOptions:
    """Validate ``job_worker()``'s keyword arguments into ``WorkerOptions``."""
    if queues is None:
        served = _queue_names(sorted(set(registered_queues)), "queues")
        if not served:
            raise _refuse(
                "queues",
                "no registered job names a queue; pass queues=[...] or register the app's jobs "
                "(define_api) before building the worker",
                None,
            )
    else:
        served = _queue_names(queues, "queues")
        if not served:
            raise _refuse("queues", "must name at least one queue", queues)
    per_queue: dict[str, int] = {}
    if isinstance(concurrency, Mapping):
        for queue, slots in concurrency.items():
            per_queue[queue] = _whole(f"concurrency[{queue!r}]", slots)
        default = JOBS_CONCURRENCY_DEFAULT
    else:
        default = _whole("concurrency", concurrency)
    resolved = {q: per_queue.get(q, default) for q in served}
    cap = None if max_in_flight is None else _whole("max_in_flight", max_in_flight)
    if limits is not None and not isinstance(limits, LimitConfig):
        raise _refuse("limits", "must be a LimitConfig", limits)
    visibility = _whole("visibility_timeout_ms", visibility_timeout_ms)
    if heartbeat_interval_ms is None:
        heartbeat = max(1, visibility // 3)
    else:
        heartbeat = _whole("heartbeat_interval_ms", heartbeat_interval_ms)
        if heartbeat >= visibility:
            raise _refuse(
                "heartbeat_interval_ms",
                f"must be under visibility_timeout_ms ({visibility}) — a renewal per window "
                "lets the lease lapse on the first slow one; a third of it is the default",
                heartbeat_interval_ms,
            )
    poll = _whole("poll_interval_ms", poll_interval_ms)
    idle_max = None
    if idle_poll_max_ms is not None:
        idle_max = _whole("idle_poll_max_ms", idle_poll_max_ms)
        if idle_max < poll:
            raise _refuse(
                "idle_poll_max_ms", f"must not be under poll_interval_ms ({poll})", idle_poll_max_ms
            )
    if worker_id is not None and (not isinstance(worker_id, str) or not worker_id.strip()):
        raise _refuse("worker_id", "must be a non-empty string", worker_id)
    return WorkerOptions(
        worker_id=worker_id or default_worker_id(),
        queues=served,
        concurrency=resolved,
        max_in_flight=cap,
        limits=limits,
        visibility_timeout_ms=visibility,
        heartbeat_interval_ms=heartbeat,
        poll_interval_ms=poll,
        idle_poll_max_ms=idle_max,
        drain_on_shutdown=bool(drain_on_shutdown),
        close_driver=bool(close_driver),
        claim_ahead=_whole("claim_ahead", claim_ahead, minimum=0),
        strict_queues=_strict_queues(fair, served),
    )
