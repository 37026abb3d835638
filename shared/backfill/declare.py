"""``backfill()``: a data migration declared as a job — one pass over every row a source matches.

A factory over ``job()``, not a new primitive: the answer IS a ``JobHandle`` (``.enqueue({})``,
``.enqueue({"force": True})``), with the retry policy, the queue, the cancellation and the
dead-letter path a job has. What it adds is checked where it is written: ``batch`` (a whole
number >= 1) and ``rate`` (finite and positive) are refused at declaration, so a ``0``, a
``1.5`` or a ``NaN`` from an env var fails the build and not the fourth attempt. ``requires``,
``environments`` and ``count`` are data the pass, the CLI and ``pending_backfills()`` read.

The handle is stamped as a backfill in a weak map (``is_backfill``): an app registers nothing a
second time, and a plain ``job()`` — or a look-alike with the same name — is not one.
"""

from __future__ import annotations

import hashlib
import inspect
import weakref
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ujobs.backfill.source import (
    DEFAULT_BACKFILL_BATCH,
    DEFAULT_BACKFILL_RATE,
    BatchSource,
    valid_batch,
    valid_rate,
)
from ujobs.drivers.base import DEFAULT_QUEUE
from ujobs.errors import JobDeclarationInvalidError
from ujobs.jobs.job import JobHandle, TenantSpec, job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t

SourceFn = Callable[[Any], BatchSource]
CountFn = Callable[[Any], Any]
HandleFn = Callable[[Sequence[Any], Any], Any]

BACKFILL_INPUT = t.object(force=t.optional(t.boolean))


@dataclass(frozen=True, slots=True)
class BackfillDefinition:
    """What was DECLARED: the pass reads it, the ledger stores its checksum."""

    name: str
    source: SourceFn
    handle: HandleFn
    batch: int
    rate: float
    tenant: TenantSpec
    requires: str | None
    environments: tuple[str, ...] | None
    count: CountFn | None
    checksum: str
    checksum_with_batch: str
    """What this declaration's checksum was while ``batch`` was part of it: ledger rows of
    those releases carry it, and it is not a moved checksum."""

    def moved_from(self, checksum: str) -> bool:
        """Whether a ledger row's ``checksum`` names another definition than this one."""
        return checksum not in (self.checksum, self.checksum_with_batch)

    def describe(self) -> dict[str, Any]:
        """The ``registered_backfills()`` row. ``tenant`` is ``none`` (one pass sweeps every
        tenant) or ``scoped`` (a pass per org): the ledger's scopes are read by it."""
        return {
            "kind": "backfill",
            "name": self.name,
            "checksum": self.checksum,
            "checksumWithBatch": self.checksum_with_batch,
            "requires": self.requires,
            "environments": None if self.environments is None else list(self.environments),
            "counts": self.count is not None,
            "tenant": "none" if self.tenant == "none" else "scoped",
        }


def checksum_moved(declaration: Mapping[str, Any], checksum: str) -> bool:
    """Whether a ledger row's ``checksum`` differs from a ``registered_backfills()`` row's:
    neither its checksum nor the one the same declaration had while ``batch`` was hashed."""
    return checksum not in (declaration["checksum"], declaration.get("checksumWithBatch"))


_origin: weakref.WeakKeyDictionary[JobHandle[Any], BackfillDefinition] = weakref.WeakKeyDictionary()


def definition_of(handle: Any) -> BackfillDefinition | None:
    """The backfill ``handle`` was declared as, or None for anything else."""
    try:
        return _origin.get(handle)
    except TypeError:  # not weak-referenceable: certainly not a backfill handle
        return None


def declared_backfills() -> list[tuple[JobHandle[Any], BackfillDefinition]]:
    """Every live backfill handle of the process and its definition, by name."""
    return sorted(_origin.items(), key=lambda pair: pair[1].name)


def _text(fn: Any) -> str:
    """A function's source text (what the checksum hashes), else its qualified name."""
    if fn is None:
        return ""
    try:
        return inspect.getsource(fn)
    except (OSError, TypeError):
        return f"{getattr(fn, '__module__', '')}.{getattr(fn, '__qualname__', repr(fn))}"


def definition_checksum(
    *,
    name: str,
    source: Any,
    handle: Any,
    count: Any,
    requires: str | None,
    environments: tuple[str, ...] | None,
    batch: int | None = None,
) -> str:
    """sha-256 of what makes a sweep THIS sweep: its name, the source text of source, handle
    and count, requires and environments. ``batch`` and ``rate`` are tuning, not identity, and
    are not in it; function text moves under a bundler, so a moved checksum only warns.

    ``batch`` given answers the checksum ledger rows written before batch left it (it was
    hashed second), so a row of an earlier release still matches its unchanged declaration."""
    parts = [
        name,
        *([] if batch is None else [str(batch)]),
        _text(source),
        _text(handle),
        _text(count),
        requires or "",
        ",".join(environments or ()),
    ]
    return hashlib.sha256("\x1f".join(parts).encode("utf-8")).hexdigest()


def _invalid(name: str, message: str, field: str) -> JobDeclarationInvalidError:
    return JobDeclarationInvalidError(
        f"backfill {name!r}: {message}", meta={"job": name, "field": field}
    )


def backfill(
    *,
    name: str,
    source: SourceFn,
    handle: HandleFn,
    tenant: TenantSpec,
    batch: int = DEFAULT_BACKFILL_BATCH,
    rate: float = DEFAULT_BACKFILL_RATE,
    requires: str | None = None,
    environments: Sequence[str] | None = None,
    count: CountFn | None = None,
    queue: str = DEFAULT_QUEUE,
    retry: Retry | None = None,
    timeout: Any = None,
    step_timeout: Any = None,
    description: str | None = None,
) -> JobHandle[Any]:
    """Declare a backfill: ``source(ctx)`` answers a ``BatchSource`` (``keyset(...)``), each
    page is handed to ``handle(rows, signal)`` inside its own step ``batch:N``; ``tenant`` is
    required exactly as on ``job()`` (``'none'``: every tenant, the pass opens that scope)."""
    if not valid_batch(batch):
        raise _invalid(name, f"batch must be a whole number of at least 1; got {batch!r}", "batch")
    if not valid_rate(rate):
        raise _invalid(
            name,
            f"rate must be a finite number of batches per second above zero; got {rate!r} "
            "(there is no unthrottled mode: rate=200 is the fast sweep)",
            "rate",
        )
    for field, fn in (("source", source), ("handle", handle)):
        if not callable(fn):
            raise _invalid(name, f"{field} must be a function", field)
    if count is not None and not callable(count):
        raise _invalid(name, "count must be a function of the ctx", "count")
    if requires is not None and (not isinstance(requires, str) or not requires):
        raise _invalid(name, "requires must be a migration id", "requires")
    envs: tuple[str, ...] | None = None
    if environments is not None:
        if isinstance(environments, str) or not all(isinstance(e, str) and e for e in environments):
            raise _invalid(name, "environments must be a list of names", "environments")
        envs = tuple(environments)
    identity: dict[str, Any] = {
        "name": name,
        "source": source,
        "handle": handle,
        "count": count,
        "requires": requires,
        "environments": envs,
    }
    definition = BackfillDefinition(
        name=name,
        source=source,
        handle=handle,
        batch=batch,
        rate=float(rate),
        tenant=tenant,
        requires=requires,
        environments=envs,
        count=count,
        checksum=definition_checksum(**identity),
        checksum_with_batch=definition_checksum(**identity, batch=batch),
    )
    from ujobs.backfill.pass_run import pass_body

    declared = job(
        name=name,
        run=pass_body(definition),
        input=BACKFILL_INPUT,
        idempotency_key=name,
        tenant=tenant,
        queue=queue,
        retry=retry,
        timeout=timeout,
        step_timeout=step_timeout,
        description=description or f"backfill {name} ({batch} rows a batch, {rate}/s)",
    )
    _origin[declared] = definition
    return declared
