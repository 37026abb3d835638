"""``ujobs db purge [--dry-run] [--json]``: one retention pass by hand, outside the queue,
against one reading of the clock; it says what it removed per table (``--dry-run``: what it
would). The services' own ``x.purge`` is registered by ``ujobs.services.runtime.retention``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from ujobs.clock import SYSTEM_CLOCK
from ujobs.retention.builtin import RetentionWindows, builtin_targets
from ujobs.retention.jobs_target import JobsPurgeTarget
from ujobs.services.cli.common import DatabaseUrlOption, JsonOption, operate
from ujobs.services.config.settings import environment, read_common
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import Progress, emit_json, print_table, reported

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

DryRunOption = Annotated[
    bool, typer.Option("--dry-run", help="count what a pass would remove; delete nothing")
]


def purge_command(
    dry_run: DryRunOption = False,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run one retention pass now (x_jobs with their steps and lapsed leases, x_outbox,
    x_job_events, webhook deliveries and events, x_settlements) and say what it removed;
    --dry-run counts instead."""

    with reported(as_json=as_json):
        windows = read_common(environment(), "db purge", database_url=database_url).retention

    async def work(backend: Backend, progress: Progress) -> dict[str, Any]:
        pool = backend.require_pool("ujobs db purge")
        return await purge_pass(pool, dry_run=dry_run, progress=progress, windows=windows)

    answer = operate(
        work,
        as_json=as_json,
        label="counting expired rows" if dry_run else "purging",
        database_url=database_url,
        driver="postgres",
    )
    if as_json:
        emit_json(answer)
        return
    verb = "would remove" if dry_run else "removed"
    rows = [(name, n, detail) for name, (n, detail) in _rows(answer).items()]
    print_table(["TABLE", verb.upper(), "DETAIL"], rows)


def _rows(answer: dict[str, Any]) -> dict[str, tuple[int, str | None]]:
    shown: dict[str, tuple[int, str | None]] = {}
    for name, removed in answer["targets"].items():
        detail = answer["detail"].get(name)
        text = None if detail is None else ", ".join(f"{k} {v}" for k, v in detail.items())
        shown[name] = (removed, text)
    return shown


async def purge_pass(
    pool: Pool,
    *,
    dry_run: bool,
    progress: Progress | None = None,
    windows: RetentionWindows | None = None,
) -> dict[str, Any]:
    """One pass of ``x.purge``'s targets at one clock reading; the command's JSON answer."""
    now_ms = SYSTEM_CLOCK.now_ms()
    removed: dict[str, int] = {}
    detail: dict[str, dict[str, int]] = {}
    for target in builtin_targets(pool, windows or RetentionWindows()):
        if progress is not None:
            progress.update(f"{'counting' if dry_run else 'purging'} {target.name}")
        if dry_run:
            count = getattr(target, "count_expired", None)
            removed[target.name] = 0 if count is None else int(await count(now_ms) or 0)
            continue
        removed[target.name] = await target.purge_expired(now_ms)
        if isinstance(target, JobsPurgeTarget):
            last = target.last
            detail[target.name] = {"jobs": last.jobs, "steps": last.steps, "leases": last.leases}
    return {
        "dryRun": dry_run,
        "nowMs": now_ms,
        "targets": removed,
        "detail": detail,
        "total": sum(removed.values()),
    }
