"""Tenant-fair claims (issue 41): the hand-out order every driver follows, and tenant weights.

The model. Priority first, fair inside a band: within a queue that is not strict, a claim of
``limit`` rows interleaves the tenants that have due work in the queue's TOP BAND (the lowest
priority, 0 first, with a due row), weighted round robin from a rotating cursor:

1. **Walk.** The tenants with claimable rows in the band, in byte order, starting AFTER the
   queue's cursor (the tenant the previous claim served last) and wrapping round to it: at most
   ``limit`` tenants (more could not each get a row). Jobs without a tenant are one group,
   keyed ``''`` (a tenant id is never empty), so they sort first.
2. **Rounds.** ``rounds = ceil(limit / sum of the walked tenants' weights)``; each walked tenant
   offers its oldest ``min(limit, weight * rounds)`` due rows. Row ``i`` (1-based) of a tenant
   of weight ``w`` is in round ``ceil(i / w)``; the fair rows are ranked by (round, the
   tenant's place in the walk, ``i``). A tenant of weight 3 gets three rows a round to a
   weight-1 tenant's one.
3. **Fill.** Work-conserving: the slots the fair rows leave (a lone tenant, tenants with few
   rows) go to the queue's other due rows by (priority, run_at, seq), as a strict queue hands
   them out.
4. **Cursor.** The queue's cursor moves to the tenant of the last fair row handed out, so the
   next claim starts with the tenant after it: over many claims every tenant gets its turn
   whatever the batch size.

Across queues (a claim of several), rows go by priority; within one priority, lapsed-lease
rows first (oldest first, as before), then the fair rows of every fair queue by (round, place
in the walk, queue, ``i``), then the fill of every queue, strict ones included, by (run_at,
seq). A strict queue (``fair=False``, ``UJOBS_STRICT_QUEUES``) is served
by priority then first-in first-out only.

Postgres runs this inside its claim statement (sql/queries/claim.sql), Redis inside claim.lua;
the memory driver calls ``claim_order`` here. This module does no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ujobs.errors import InputInvalidError
from ujobs.limits import check_text

WEIGHT_MIN = 1
WEIGHT_MAX = 1000
DEFAULT_WEIGHT = 1
"""A tenant no operator weighed."""

NO_TENANT = ""
"""The group key of the jobs without a tenant (a tenant id is never empty)."""


def group_of(tenant_id: str | None) -> str:
    """The fairness group of a row: its tenant, or ``NO_TENANT``."""
    return NO_TENANT if tenant_id is None else tenant_id


def check_weight(value: object) -> int:
    """A weight in ``WEIGHT_MIN..WEIGHT_MAX``; anything else ``X_INPUT_INVALID``."""
    if isinstance(value, bool) or not isinstance(value, int):
        problem = f"must be a whole number from {WEIGHT_MIN} to {WEIGHT_MAX}"
    elif not WEIGHT_MIN <= value <= WEIGHT_MAX:
        problem = f"must be from {WEIGHT_MIN} to {WEIGHT_MAX}"
    else:
        return value
    raise InputInvalidError(
        f"weight {problem}, got {value!r}",
        meta={"issues": [{"path": "weight", "message": problem}]},
    )


def check_tenant(value: object) -> str:
    """A tenant id a weight may be set for: non-empty text within the tenant limit."""
    tenant = check_text("tenant", value)
    if not tenant:
        raise InputInvalidError(
            "tenant must not be empty",
            meta={"issues": [{"path": "tenant", "message": "must not be empty"}]},
        )
    return tenant


@runtime_checkable
class TenantWeights(Protocol):
    """Where a deployment's tenant weights live (Postgres ``x_tenant_weights``, Redis
    ``{p}:tw``, the memory driver's heap); the claim reads them on every call."""

    async def weight(self, tenant_id: str) -> int:
        """The tenant's weight (``DEFAULT_WEIGHT`` when none was set)."""
        ...

    async def set_weight(self, tenant_id: str, weight: int) -> int:
        """Store a checked weight; answers it."""
        ...


def weights_of(driver: object) -> TenantWeights | None:
    """The driver's ``weights`` capability (seen through any wrapper), or None."""
    weights = getattr(driver, "weights", None)
    return weights if isinstance(weights, TenantWeights) else None


@dataclass(frozen=True, slots=True)
class FairRow:
    """What the order needs of a due row."""

    id: str
    queue: str
    tenant: str
    """``group_of(tenant_id)``."""
    run_at_ms: int
    seq: int
    priority: int = 0
    """0..9, 0 first (``EnqueueRequest.priority``)."""


def _fifo(row: FairRow) -> tuple[int, int, int]:
    return (row.priority, row.run_at_ms, row.seq)


def walk(tenants: Iterable[str], cursor: str | None, limit: int) -> list[str]:
    """The tenants a claim visits: those after ``cursor``, then wrapping round to it, at most
    ``limit``; all of them from the first when the queue has no cursor yet."""
    ordered = sorted(set(tenants))
    if cursor is None:
        return ordered[:limit]
    ahead = [t for t in ordered if t > cursor]
    behind = [t for t in ordered if t <= cursor]
    return (ahead + behind)[:limit]


def fair_order(
    rows: Sequence[FairRow],
    *,
    limit: int,
    cursor: str | None,
    weights: Mapping[str, int],
    tenants: Iterable[str] = (),
) -> list[tuple[tuple[int, int, int], FairRow]]:
    """One queue's fair rows with their rank (round, place in the walk, index in tenant):
    each walked tenant's oldest ``min(limit, weight * rounds)`` due rows, best first.
    ``tenants`` adds the tenants whose claimable rows are not due yet: the drivers' walks
    visit every tenant with a claimable row (one index descent or lex step each), so such a
    tenant takes a place in the walk and its weight counts in the rounds."""
    by_tenant: dict[str, list[FairRow]] = {t: [] for t in tenants}
    for row in sorted(rows, key=_fifo):
        by_tenant.setdefault(row.tenant, []).append(row)
    walked = walk(by_tenant, cursor, limit)
    if not walked:
        return []
    weight = {t: weights.get(t, DEFAULT_WEIGHT) if t else DEFAULT_WEIGHT for t in walked}
    rounds = math.ceil(limit / sum(weight.values()))
    ranked: list[tuple[tuple[int, int, int], FairRow]] = []
    for place, tenant in enumerate(walked):
        w = weight[tenant]
        for i, row in enumerate(by_tenant[tenant][: min(limit, w * rounds)], start=1):
            ranked.append(((math.ceil(i / w), place, i), row))
    ranked.sort(key=lambda pair: pair[0])
    return ranked


@dataclass(frozen=True, slots=True)
class ClaimPlan:
    """The rows to hand out, in hand-out order, and each fair queue's next cursor."""

    rows: list[FairRow]
    cursors: dict[str, str]


def claim_order(
    due: Sequence[FairRow],
    *,
    limit: int,
    lapsed: Sequence[FairRow] = (),
    strict: frozenset[str] = frozenset(),
    cursors: Mapping[str, str] | None = None,
    weights: Mapping[str, int] | None = None,
    waiting: Mapping[str, Iterable[tuple[int, str]]] | None = None,
) -> ClaimPlan:
    """The hand-out order of one claim (see the module's docstring): by priority, and within
    one: ``lapsed``, the fair rows of each queue's top band (every queue not in ``strict``),
    the fill; at most ``limit`` rows. ``due`` holds every due row of the claimed queues;
    ``waiting`` each queue's (priority, tenant) whose claimable rows are not due yet (see
    ``fair_order``)."""
    cursors = cursors or {}
    weights = weights or {}
    waiting = waiting or {}
    picked: list[FairRow] = []
    per_queue: dict[str, list[FairRow]] = {}
    for row in due:
        if row.queue not in strict:
            per_queue.setdefault(row.queue, []).append(row)
    ready: list[tuple[tuple[int, int, int, int, str, int, int, int], FairRow]] = [
        ((row.priority, 0, 0, 0, "", 0, row.run_at_ms, row.seq), row) for row in lapsed
    ]
    fair_ids: set[str] = set()
    for queue, rows in per_queue.items():
        band = min(r.priority for r in rows)
        ranked = fair_order(
            [r for r in rows if r.priority == band],
            limit=limit,
            cursor=cursors.get(queue),
            weights=weights,
            tenants=[t for p, t in waiting.get(queue, ()) if p == band],
        )
        for rank, row in ranked:
            ready.append(((band, 1, rank[0], rank[1], queue, rank[2], 0, 0), row))
            fair_ids.add(row.id)
    for row in due:
        if row.id not in fair_ids:
            ready.append(((row.priority, 2, 0, 0, "", 0, row.run_at_ms, row.seq), row))
    ready.sort(key=lambda pair: pair[0])
    moved: dict[str, str] = {}
    for key, row in ready:
        if len(picked) >= limit:
            break
        picked.append(row)
        if key[1] == 1:
            moved[row.queue] = row.tenant
    return ClaimPlan(picked, moved)


__all__ = [
    "DEFAULT_WEIGHT",
    "NO_TENANT",
    "WEIGHT_MAX",
    "WEIGHT_MIN",
    "ClaimPlan",
    "FairRow",
    "TenantWeights",
    "check_tenant",
    "check_weight",
    "claim_order",
    "fair_order",
    "group_of",
    "walk",
    "weights_of",
]
