"""One backfill PASS: the body of the job ``backfill()`` declares.

In order:

1. ``environments`` is the rail: a pass in an environment the declaration excludes fails with
   ``X_BACKFILL_ENVIRONMENT`` (terminal) before it reads a row — ``.enqueue()`` from app code
   reaches no command, so the pass itself must refuse.
2. The ledger (``driver.backfills``; a driver without one runs the pass anyway, no bookkeeping):
   a COMPLETED row of another run in this pass's scope (its tenant; every tenant for
   ``tenant='none'``) makes this run a no-op answering ``{skipped: True, previousRunId}``
   unless the input says ``force`` (a moved checksum warns
   ``jobs.backfill.checksum-moved``, never refuses; a row's checksum from a release that still
   hashed ``batch`` is not a moved one). Otherwise ``begin`` adopts this run's row
   (a retry keeps ``started_at``) or writes a new one (``force`` is a new run, so a new row),
   recording the tenant the pass is scoped to.
3. Pages: step ``batch:N`` per page, the throttle's pause inside it, then ``handle(rows,
   signal)`` (no step of its own — a step minted inside it would collide on batch 2); the
   step's output is the cursor and the running count, never the rows. Completed steps replay
   from storage without a statement or a pause, so a killed pass resumes on the page it
   stopped at. The ledger row gets the count and cursor after a page that ran (a report,
   never the resume source), at most once a second and after the last page.
4. ``count`` (when declared), once after the last batch: a safe non-negative integer or
   ``X_INVARIANT``; above zero is ``X_BACKFILL_STALLED`` (terminal) — the source ran out while
   the predicate still matches.
5. The row is marked ``completed``, or ``failed`` with the error when the attempt failed. A
   drain is not a failure: the attempt is handed back uncounted, whether the drain surfaced as
   ``X_DRAINING`` (a step refused to start) or as the ``X_ABORTED`` its abort raised in the
   throttle's pause or in ``handle`` (``handed_back``), so the row stays ``running`` and the
   next attempt adopts it. ``tenant='none'`` runs steps 3-4 inside ``cross_tenant()``: the
   source is lazy, so the author has nothing to wrap.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any

from ujobs.backfill.settings import backfill_settings
from ujobs.backfill.source import BatchSource, Throttle, maybe_await
from ujobs.context import cross_tenant
from ujobs.drivers.base import BackfillLedger
from ujobs.errors import (
    BackfillEnvironmentError,
    BackfillStalledError,
    InvariantError,
    JobDrainedError,
    error_code_of,
    register_error_retry,
)
from ujobs.execution.run import Run
from ujobs.execution.scope import job_scope
from ujobs.jobs.enqueue_target import has_job_driver, job_driver

if TYPE_CHECKING:
    from ujobs.backfill.declare import BackfillDefinition

log = logging.getLogger("ujobs.jobs")

MAX_SAFE_INTEGER = 2**53 - 1
BATCH_STEP_PREFIX = "batch:"
PROGRESS_EVERY_S = 1.0
"""The ledger row is a report: it gets the count and cursor at most once a second (and after
the last page), so a fast pass does not pay a second round trip per page for it."""

register_error_retry(
    {
        "X_BACKFILL_ENVIRONMENT": "terminal",
        "X_BACKFILL_STALLED": "terminal",
        "X_BACKFILL_MIGRATION_PENDING": "terminal",
    }
)


def check_environment(definition: BackfillDefinition, environment: str | None) -> None:
    """``X_BACKFILL_ENVIRONMENT`` when the declaration excludes ``environment``."""
    allowed = definition.environments
    if allowed is None or environment in allowed:
        return
    raise BackfillEnvironmentError(
        f"backfill {definition.name!r} runs in {', '.join(allowed)}; this is "
        f"{environment or 'an unnamed environment'} (set UJOBS_ENVIRONMENT on the services)",
        meta={"backfill": definition.name, "environment": environment, "allowed": list(allowed)},
    )


def parse_count(definition: BackfillDefinition, answer: Any) -> int:
    """``count()``'s answer, parsed: a non-negative safe integer, else ``X_INVARIANT``."""
    if (
        isinstance(answer, bool)
        or not isinstance(answer, int)
        or not 0 <= answer <= MAX_SAFE_INTEGER
    ):
        raise InvariantError(
            f"backfill {definition.name!r}: count() answered {answer!r}; it must answer a "
            "whole number of rows the source still matches (0 or more)",
            meta={"backfill": definition.name},
        )
    return answer


async def count_left(definition: BackfillDefinition, ctx: Any) -> int | None:
    """``count(ctx)``, parsed; None when the declaration has no ``count``. The pass calls it
    after its last batch and the dry run before any: one call, one ctx, one parse."""
    if definition.count is None:
        return None
    return parse_count(definition, await maybe_await(definition.count(ctx)))


async def dry_count(definition: BackfillDefinition, ctx: Any, tenant: str | None) -> int | None:
    """What a pass for ``tenant`` would touch, counted as the pass counts: ``count(ctx)`` under
    the pass's actor (``tenant``'s org) and scope (every tenant for ``tenant='none'``)."""
    with job_scope(None if definition.tenant == "none" else tenant, None), _scope(definition):
        return await count_left(definition, ctx)


def ledger_of_installed_driver() -> BackfillLedger | None:
    return job_driver().backfills if has_job_driver() else None


def pass_body(definition: BackfillDefinition) -> Callable[[Run[Any]], Awaitable[Any]]:
    async def body(run: Run[Any]) -> dict[str, Any]:
        return await run_pass(definition, run, ledger=ledger_of_installed_driver())

    body.__name__ = body.__qualname__ = "backfill_pass"
    return body


async def run_pass(
    definition: BackfillDefinition, run: Run[Any], *, ledger: BackfillLedger | None
) -> dict[str, Any]:
    settings = backfill_settings()
    check_environment(definition, settings.environment)
    force = bool(getattr(run.input, "force", False))
    name = definition.name
    tenant = None if definition.tenant == "none" else run.tenant_id
    if ledger is not None and not force:
        previous = await ledger.latest_completed(name, tenant)
        if previous is not None and previous.run_id != run.run_id:
            if definition.moved_from(previous.checksum):
                log.warning(
                    "jobs.backfill.checksum-moved",
                    extra={"backfill": name, "previous_run_id": previous.run_id},
                )
            return {
                "name": name,
                "batches": 0,
                "rows": 0,
                "skipped": True,
                "previousRunId": previous.run_id,
            }
    if ledger is not None:
        await ledger.begin(name, run.run_id, definition.checksum, settings.app_version, tenant)
    try:
        with _scope(definition):
            batches, rows = await _sweep(definition, run, ledger, tenant)
            left = await count_left(definition, run.ctx)
            if left is not None and left > 0:
                raise BackfillStalledError(
                    f"backfill {name!r}: the source ran out after {rows} rows while count() "
                    f"still matches {left}; source and count select different rows",
                    meta={"backfill": name, "rows": rows, "left": left},
                )
    except Exception as exc:
        if handed_back(exc, run):
            raise  # uncounted: the row stays running, the next attempt adopts it
        if ledger is not None:
            with contextlib.suppress(Exception):
                await ledger.finish(name, run.run_id, "failed", str(exc), tenant=tenant)
        raise
    if ledger is not None:
        await ledger.finish(name, run.run_id, "completed", tenant=tenant)
    return {"name": name, "batches": batches, "rows": rows, "skipped": False, "runId": run.run_id}


def handed_back(error: BaseException, run: Run[Any]) -> bool:
    """Whether ``error`` is a drain's hand-back: ``X_DRAINING`` itself, or what a drain's abort
    made of it (the throttle's pause or a ``handle`` ending on the signal raises ``X_ABORTED``
    caused by the drain). The attempt is handed back uncounted either way, so the ledger row
    must not say ``failed``."""
    reason = run.signal.reason
    if reason is not None and error_code_of(reason) == JobDrainedError.code:
        return True
    chain: list[BaseException] = []
    link: BaseException | None = error
    while link is not None and link not in chain:
        if error_code_of(link) == JobDrainedError.code:
            return True
        chain.append(link)
        link = link.__cause__ or link.__context__
    return False


@contextlib.contextmanager
def _scope(definition: BackfillDefinition) -> Iterator[None]:
    if definition.tenant == "none":
        with cross_tenant(f"backfill {definition.name} sweeps every tenant"):
            yield
    else:
        yield


async def _sweep(
    definition: BackfillDefinition,
    run: Run[Any],
    ledger: BackfillLedger | None,
    tenant: str | None,
) -> tuple[int, int]:
    source = definition.source(run.ctx)
    if not isinstance(source, BatchSource):
        raise InvariantError(
            f"backfill {definition.name!r}: source() must answer a BatchSource (page(after, "
            f"limit) and cursor(row)), e.g. keyset(fetch, key='id'); got {source!r}",
            meta={"backfill": definition.name},
        )
    throttle = Throttle(definition.rate)
    index, cursor, rows = 0, None, 0
    reported = -PROGRESS_EVERY_S
    while True:
        ran: list[bool] = []
        page = _page(definition, source, throttle, cursor, rows, ran)
        out = await run.step.run(f"{BATCH_STEP_PREFIX}{index}", page)
        cursor, rows = out["cursor"], int(out["rows"])
        index += 1
        if out["done"]:
            break
        if ran and ledger is not None and time.monotonic() - reported >= PROGRESS_EVERY_S:
            reported = time.monotonic()
            await ledger.progress(definition.name, run.run_id, rows, cursor, tenant=tenant)
    if ledger is not None:
        await ledger.progress(definition.name, run.run_id, rows, cursor, tenant=tenant)
    return index, rows


def _page(
    definition: BackfillDefinition,
    source: BatchSource,
    throttle: Throttle,
    cursor: Any,
    rows_before: int,
    ran: list[bool],
) -> Callable[[Any], Awaitable[dict[str, Any]]]:
    async def page(signal: Any) -> dict[str, Any]:
        ran.append(True)
        await throttle.wait(signal)
        found = list(await source.page(cursor, definition.batch))
        after = cursor
        if found:
            await maybe_await(definition.handle(found, signal))
            after = source.cursor(found[-1])
        return {
            "cursor": after,
            "rows": rows_before + len(found),
            "n": len(found),
            "done": len(found) < definition.batch,
        }

    return page
