"""The rules a declaration is checked against where it is written.

A ``concurrency: 0`` or a ``step_timeout`` of zero would otherwise mean "no limit", the
opposite of what the author wrote, and surface only in production; an explicit ``name=``
another live definition already holds would move rows between two jobs. ``job()`` and
``task()`` both call in here, so the rules are one list.
"""

from __future__ import annotations

import math
import re
import threading
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import quote

from ujobs.durations import Duration, duration_ms
from ujobs.errors import (
    InvariantError,
    JobConcurrencyInvalidError,
    JobDeclarationInvalidError,
    JobNameTakenError,
)
from ujobs.limits import MAX_CONCURRENCY_KEY_BYTES, MAX_IDEMPOTENCY_KEY_BYTES, MAX_JOB_NAME_BYTES

MAX_CONCURRENCY_KEY_LENGTH = MAX_CONCURRENCY_KEY_BYTES
MAX_IDEMPOTENCY_KEY_LENGTH = MAX_IDEMPOTENCY_KEY_BYTES
DEFAULT_EVENT_POLL_MS = 30_000
NAME_PATTERN = re.compile(rf"^[A-Za-z0-9_][A-Za-z0-9_.:/\-]{{0,{MAX_JOB_NAME_BYTES - 1}}}\Z")
"""A job's, a task's and a queue's name: ASCII, so its characters are its bytes
(``ujobs.limits``: ``name`` and ``queue`` are one length). ``\\Z``, not ``$``: a name
does not end in a newline."""

WhenBusy = Literal["wait", "fail"]


@dataclass(frozen=True, slots=True)
class KeyedConcurrency:
    """At most ``limit`` runs per ``key(input)`` fleet-wide; ``when_busy`` decides the rest."""

    key: Callable[[Any], str]
    limit: int = 1
    when_busy: WhenBusy = "wait"


Concurrency = int | KeyedConcurrency | Mapping[str, Any]


def job_lease_key(name: str, key: str) -> str:
    """The lease row of one concurrency key of job ``name``."""
    return f"job-key:{quote(name, safe='')}:{key}"


def job_cap_key(name: str) -> str:
    """The lease row of a plain ``concurrency=N`` cap."""
    return f"job:{name}"


def declaration_invalid(name: str, message: str, **meta: Any) -> JobDeclarationInvalidError:
    return JobDeclarationInvalidError(f"job {name!r}: {message}", meta={"job": name, **meta})


def _whole_positive(value: Any) -> bool:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and (not math.isfinite(value) or not value.is_integer()):
        return False
    return value >= 1


def positive_duration(name: str, field: str, value: Duration | None) -> int | None:
    if value is None:
        return None
    try:
        ms = duration_ms(value, field=field)
    except InvariantError as exc:
        raise declaration_invalid(name, exc.message, field=field) from None
    if ms <= 0:
        raise declaration_invalid(
            name,
            f"{field} must be above zero; omit it for no ceiling",
            field=field,
        )
    return ms


def validate_concurrency(name: str, value: Concurrency | None) -> int | KeyedConcurrency | None:
    """A plain cap (a whole number >= 1) or ``{key, limit, when_busy}``; anything else refused."""
    if value is None:
        return None
    if isinstance(value, Mapping):
        unknown = set(value) - {"key", "limit", "when_busy"}
        if unknown:
            raise JobConcurrencyInvalidError(
                f"job {name!r}: unknown concurrency field(s) {sorted(unknown)}",
                meta={"job": name},
            )
        if "key" not in value:
            raise JobConcurrencyInvalidError(
                f"job {name!r}: a concurrency table needs a key function", meta={"job": name}
            )
        value = KeyedConcurrency(
            key=value["key"], limit=value.get("limit", 1), when_busy=value.get("when_busy", "wait")
        )
    if isinstance(value, KeyedConcurrency):
        if not callable(value.key):
            raise JobConcurrencyInvalidError(
                f"job {name!r}: concurrency.key must be a function of the input",
                meta={"job": name},
            )
        if not _whole_positive(value.limit):
            raise JobConcurrencyInvalidError(
                f"job {name!r}: concurrency.limit must be a whole number of at least 1",
                meta={"job": name, "limit": repr(value.limit)},
            )
        if value.when_busy not in ("wait", "fail"):
            raise JobConcurrencyInvalidError(
                f"job {name!r}: concurrency.when_busy must be 'wait' or 'fail'",
                meta={"job": name, "when_busy": repr(value.when_busy)},
            )
        return KeyedConcurrency(value.key, int(value.limit), value.when_busy)
    if not _whole_positive(value):
        raise JobConcurrencyInvalidError(
            f"job {name!r}: concurrency must be a whole number of at least 1 "
            "(or {key, limit, when_busy})",
            meta={"job": name, "concurrency": repr(value)},
        )
    return int(value)


def validate_name(name: Any, *, kind: str = "job") -> str:
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise JobDeclarationInvalidError(
            f"{kind} name {name!r} must be 1-{MAX_JOB_NAME_BYTES} characters of letters, digits "
            "and _ . : / -",
            meta={"name": repr(name)},
        )
    return name


# --- explicit names are durable keys: refused at declaration when taken ---------------------

_declared_lock = threading.Lock()
_declared: dict[tuple[str, str], weakref.ref[Any]] = {}


def claim_declared_name(name: str, handle: Any, *, kind: str) -> None:
    """Refuse a second live definition setting the same ``name=`` (``X_JOB_DUPLICATE``).

    Jobs and tasks are two namespaces (two registries, two durable keys), so a task may share
    a job's name. The holder is weakly held: a definition that was garbage-collected (a module
    reloaded in a REPL) no longer seats a name out.
    """
    with _declared_lock:
        existing = _declared.get((kind, name))
        holder = existing() if existing is not None else None
        if holder is not None and holder is not handle:
            raise JobNameTakenError(
                f"{kind} name {name!r} is already declared by another definition; a name is "
                f"the durable queue key, so each must be unique — rename one of the two",
                meta={"name": name, "kind": kind},
            )
        _declared[(kind, name)] = weakref.ref(handle)


def reset_declared_names() -> None:
    """Test seam: forget every explicit name (tests declare the same jobs many times)."""
    with _declared_lock:
        _declared.clear()
