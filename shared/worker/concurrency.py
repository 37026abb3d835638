"""Fleet concurrency: the ``concurrency`` slot a run takes at EVERY claim, before its body.

Keys (``x_job_leases``): a plain cap holds ``job:<name>``; a keyed one
``job-key:<encoded name>:<key>`` (``job_lease_key``) — the name percent-encoded, so no job name
can collide with another job's key. A slot lives one visibility timeout, renewed by the
heartbeat with the row's lease, released when the run ends, and reclaimed by TTL when its
worker was SIGKILLed.

Released by the run's settle: the ack or nack that ends the run (done, retried, failed,
dead-lettered, refused, handed back, suspended by ``step.sleep``) carries the slot
(``ClaimedJob.slot``, ``JobDriver.ack`` / ``nack`` ``slot``), and the driver deletes it keyed
on (key, holder) in the settle's own write — on Postgres the same statement and commit, so a
settle that fails keeps it. A run whose settle did not land (the driver raised, the row was no
longer ours, the run was abandoned at the drain's deadline), and a slot given back before any
settle (below), is released through the lease store on its own.

The holder id is ``<percent-encoded job id>#<claim>@<worker id>``: it names the job and the
claim, so a run can tell its OWN earlier claim's leftover slot (a retry, a ``step.sleep``
resume or a redelivery meeting the slot its last claim has not yet released or let lapse) from
another run's — and the worker, for an operator reading the table.

What a busy key decides (§ One run per key):

* a slot was free: ``held`` — the body runs.
* ``when_busy='wait'`` (and every plain cap): ``wait`` — handed back uncounted, claimed again
  after a poll.
* ``'fail'``, another run holds the key: ``refuse`` — ``failed`` with ``X_JOB_KEY_BUSY``,
  outcome ``refused``.
* ``'fail'``, the only holders are this run's own earlier claims: ``wait`` one poll — a run is
  never failed by its own leftovers.
* ``'fail'``, busy at the acquire and free a moment later: ``wait`` one poll.
* ``key(input)`` threw, or the stored input no longer parses: ``failed`` — that attempt fails
  the ordinary way and the body never runs (never the claim round).
* the lease store raised: ``wait`` — logged ``jobs.worker.slot-failed``; an outage of the
  store never fails a run.

Taken by the claim (``ClaimedJob.slot``): on Postgres the claim statement itself takes the slot
of a row whose lease key was stored at enqueue (``EnqueueRequest.slot_key``), under the same
rules and holder id, for the jobs ``claim_slots`` names. ``claimed_slot`` checks that key
against the one this worker computes from the input now: the same, it is ``held`` with no
statement; different (the key function changed since the enqueue), the claim's slot is given
back and the run takes its own as above; the input or ``key(input)`` failing is ``failed``
with the claim's slot kept on the run, so its end releases it. A row claimed ahead holds the
claim's slot while it waits in the buffer (``ujobs.worker.claim_ahead``), and releases it if
it is handed back unstarted. A row the claim could not give a slot (busy, a lost race, no
stored key) takes the path above unchanged.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import unquote

from ujobs.drivers.base import ClaimedJob, JobDriver, LeaseStore, slot_holder
from ujobs.errors import ConcurrencyUnenforceableError
from ujobs.execution.scope import parse_stored
from ujobs.jobs.declaration_rules import job_cap_key as job_cap_key
from ujobs.jobs.declaration_rules import job_lease_key as job_lease_key
from ujobs.jobs.job import JobHandle, KeyedConcurrency
from ujobs.jobs.registry import Registry
from ujobs.worker.heartbeat import FleetSlot

log = logging.getLogger("ujobs.worker")

Decision = Literal["held", "wait", "refuse", "failed"]


def check_enforceable(driver: JobDriver, registry: Registry) -> None:
    """``X_JOB_CONCURRENCY_UNENFORCEABLE`` when a registered job declares ``concurrency`` and
    the driver has no lease store: a documented guarantee must not silently do nothing."""
    if driver.leases is not None:
        return
    declaring = sorted(n for n, h in registry.jobs.items() if h.concurrency is not None)
    if declaring:
        raise ConcurrencyUnenforceableError(
            f"the {driver.name!r} driver has no lease store, so the fleet-wide concurrency of "
            f"{', '.join(declaring)} cannot be held; run these jobs on a driver with leases "
            "(postgres) or drop their concurrency",
            meta={"jobs": declaring, "driver": driver.name},
        )


def claim_slots(registry: Registry) -> tuple[tuple[str, int], ...]:
    """``(name, limit)`` of every registered job declaring ``concurrency``: the slots a claim
    may take for this worker (``ClaimOptions.slots``)."""
    out: list[tuple[str, int]] = []
    for name, handle in sorted(registry.jobs.items()):
        conc = handle.concurrency
        if conc is not None:
            out.append((name, conc.limit if isinstance(conc, KeyedConcurrency) else conc))
    return tuple(out)


def claim_waits(registry: Registry) -> frozenset[str]:
    """Those of ``claim_slots``' jobs whose busy key waits (every plain cap, a keyed one with
    ``when_busy='wait'``): a claim that takes slots leaves their rows unclaimed when the key has
    no room (``ClaimOptions.slots_wait``), since this worker would only hand them back."""
    return frozenset(
        name
        for name, handle in registry.jobs.items()
        if handle.concurrency is not None
        and (
            not isinstance(handle.concurrency, KeyedConcurrency)
            or handle.concurrency.when_busy == "wait"
        )
    )


def lease_holder(claimed: ClaimedJob) -> str:
    """``<encoded job id>#<claim>@<worker id>``: which run, which claim, which worker
    (``slot_holder``, which the drivers use to release a settled run's slot)."""
    return slot_holder(claimed.id, claimed.ref)


def parse_holder(holder: str) -> tuple[str, int] | None:
    """``(job id, claim)`` from a holder id; None for one this module did not write."""
    job, sep, rest = holder.partition("#")
    claim, at, _worker = rest.partition("@")
    if not sep or not at or not claim.isdigit():
        return None
    return unquote(job), int(claim)


def own_earlier_claim(holder: str, claimed: ClaimedJob) -> bool:
    """Whether ``holder`` is this job's slot from a claim before ``claimed``'s."""
    parsed = parse_holder(holder)
    return parsed is not None and parsed[0] == claimed.id and parsed[1] < claimed.claim


@dataclass(frozen=True, slots=True)
class SlotDecision:
    kind: Decision
    slot: FleetSlot | None = None
    error: BaseException | None = None
    reason: str = ""


async def acquire_slot(
    leases: LeaseStore, handle: JobHandle[Any], claimed: ClaimedJob, *, ttl_ms: int
) -> SlotDecision:
    """Take this run's slot, or decide what a busy key means for it (the table above)."""
    conc = handle.concurrency
    assert conc is not None
    if isinstance(conc, KeyedConcurrency):
        parsed = parse_stored(handle, claimed.input, stored_tenant=claimed.tenant_id)
        if not parsed.ok:
            return SlotDecision("failed", error=parsed.error, reason="input")
        try:
            key = handle.concurrency_key_for(parsed.value)
        except Exception as exc:
            return SlotDecision("failed", error=exc, reason="key")
        assert key is not None
        lease_key, limit, when_busy = job_lease_key(handle.name, key), conc.limit, conc.when_busy
    else:
        lease_key, limit, when_busy = job_cap_key(handle.name), conc, "wait"
    holder = lease_holder(claimed)
    fields = {"job": claimed.name, "job_id": claimed.id, "key": lease_key}
    try:
        if await leases.acquire(lease_key, holder, limit, ttl_ms):
            return SlotDecision("held", slot=FleetSlot(lease_key, holder))
        if when_busy == "wait":
            return SlotDecision("wait", reason="busy")
        holders = await leases.holders(lease_key)
    except Exception as exc:
        log.warning(
            "jobs.worker.slot-failed", extra={**fields, "error": f"{type(exc).__name__}: {exc}"}
        )
        return SlotDecision("wait", reason="store-failed")
    others = [h for h in holders if not own_earlier_claim(h, claimed)]
    if len(others) >= limit:
        return SlotDecision("refuse", reason="busy")
    reason = "own-leftover" if len(others) < len(holders) else "freed"
    return SlotDecision("wait", reason=reason)


async def claimed_slot(
    leases: LeaseStore, handle: JobHandle[Any], claimed: ClaimedJob
) -> SlotDecision | None:
    """The decision for a slot the claim took (``claimed.slot``), or None when the run must
    take its own (``acquire_slot``): the key the claim used is not the one the input gives now,
    and that slot has been given back."""
    assert claimed.slot is not None
    slot = FleetSlot(claimed.slot, lease_holder(claimed))
    if isinstance(handle.concurrency, KeyedConcurrency):
        parsed = parse_stored(handle, claimed.input, stored_tenant=claimed.tenant_id)
        if not parsed.ok:
            return SlotDecision("failed", slot=slot, error=parsed.error, reason="input")
        try:
            key = handle.slot_key_for(parsed.value)
        except Exception as exc:
            return SlotDecision("failed", slot=slot, error=exc, reason="key")
    else:
        key = job_cap_key(handle.name)
    if key == claimed.slot:
        return SlotDecision("held", slot=slot)
    try:
        await leases.release(slot.key, slot.holder)
    except Exception as exc:  # it lapses by its TTL instead
        log.warning(
            "jobs.worker.slot-release-failed",
            extra={"job": claimed.name, "job_id": claimed.id, "key": slot.key, "error": repr(exc)},
        )
    return None
