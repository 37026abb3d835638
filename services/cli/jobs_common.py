"""What ``ujobs jobs`` commands share: their filter options and the parsing of flag values
(a bad one is ``X_CONFIG_INVALID`` naming the flag, like a bad variable)."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated, Any

import typer

from ujobs.drivers.base import ALL_STATES, BulkFilter, JobState
from ujobs.services.config.parse import choice, invalid

QueueOption = Annotated[str | None, typer.Option("--queue", "-q", help="only this queue")]
NameOption = Annotated[str | None, typer.Option("--name", "-n", help="only this job name")]
StateOption = Annotated[
    str | None, typer.Option("--state", "-s", help=f"one of {', '.join(ALL_STATES)}")
]
TenantOption = Annotated[str | None, typer.Option("--tenant", help="only this tenant id")]
JobIdArg = Annotated[
    str | None, typer.Argument(help="the job's id, or a unique start of it", show_default=False)
]
ERROR_WIDTH = 60


def parse_state(raw: str | None, flag: str = "--state") -> JobState | None:
    if raw is None:
        return None
    value = choice(flag, raw, ALL_STATES)
    return next(s for s in ALL_STATES if s == value)


def parse_instant(flag: str, raw: str | None) -> int | None:
    """Epoch milliseconds, or an ISO-8601 instant (``2026-01-02T03:04:05Z``)."""
    if raw is None:
        return None
    text = raw.strip()
    if re.fullmatch(r"\d+", text):
        return int(text)
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise invalid(
            flag, f"{raw!r} is neither epoch milliseconds nor an ISO-8601 instant"
        ) from None
    if parsed.tzinfo is None:
        raise invalid(flag, f"{raw!r} has no timezone; add Z or an offset")
    return int(parsed.timestamp() * 1000)


def first_line(text: str | None, width: int = ERROR_WIDTH) -> str | None:
    if not text:
        return None
    line = text.strip().splitlines()[0]
    return line if len(line) <= width else line[: width - 1] + "…"


def progress_text(progress: Any) -> str | None:
    if not isinstance(progress, dict):
        return None if progress is None else str(progress)
    done, total, label = progress.get("done"), progress.get("total"), progress.get("note")
    text = f"{done}/{total}" if total is not None else f"{done}"
    return f"{text} {label}" if label else text


def bulk_filter(
    state: str | None, queue: str | None, name: str | None, tenant: str | None
) -> BulkFilter | None:
    """The set ``--state`` (with ``--queue/--name/--tenant``) names, or None for one id."""
    chosen = parse_state(state)
    if chosen is None:
        return None
    return BulkFilter(state=chosen, queue=queue, name=name, tenant_id=tenant)
