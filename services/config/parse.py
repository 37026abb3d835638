"""Parsers for environment values: each names the variable (or flag) in its refusal.

A refusal is ``X_CONFIG_INVALID`` with the variable's name first, what was wrong, and — for a
near miss among a closed set of choices — "did you mean". Values that may carry a password
(URLs) are shown masked.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar
from urllib.parse import urlsplit

from ujobs.errors import ConfigInvalidError
from ujobs.limits import MAX_JOB_NAME_BYTES
from ujobs.services.config.variables import (
    DRIVERS,
    JOBS_CONCURRENCY_DEFAULT,
    MAX_QUEUE_NAME,
    DriverName,
)
from ujobs.services.redact import redact_url

T = TypeVar("T")


def invalid(name: str, message: str, **meta: object) -> ConfigInvalidError:
    return ConfigInvalidError(f"{name}: {message}", meta={"variable": name, **meta})


def did_you_mean(value: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(value, list(choices), n=1, cutoff=0.5)
    return f"; did you mean {close[0]!r}?" if close else ""


def whole(name: str, raw: str, *, minimum: int = 0) -> int:
    text = raw.strip().replace("_", "")
    if not re.fullmatch(r"[+]?\d+", text):
        raise invalid(name, f"{raw!r} is not a whole number", value=raw)
    value = int(text)
    if value < minimum:
        raise invalid(name, f"{value} is below the least allowed, {minimum}", value=raw)
    return value


def parse_url(name: str, raw: str, schemes: tuple[str, ...]) -> str:
    value = raw.strip()
    scheme, sep, rest = value.partition("://")
    if not sep or not rest:
        raise invalid(
            name,
            f"{redact_url(value)!r} is not a URL; expected {schemes[0]}://…",
            value=redact_url(value),
        )
    if scheme.lower() not in schemes:
        raise invalid(
            name,
            f"scheme {scheme!r} is not one of {', '.join(schemes)}"
            + did_you_mean(scheme.lower(), schemes),
            value=redact_url(value),
        )
    return value


def _queue_name(name: str, raw: str) -> str:
    queue = raw.strip()
    if not queue:
        raise invalid(name, "an empty queue name", value=raw)
    if len(queue) > MAX_QUEUE_NAME or not re.fullmatch(r"[A-Za-z0-9_.:\-]+", queue):
        raise invalid(
            name,
            f"{queue!r} is not a queue name (letters, digits, _ . : -, at most {MAX_QUEUE_NAME})",
            value=raw,
        )
    return queue


def parse_queues(name: str, raw: str) -> tuple[str, ...]:
    """``a,b`` → ``("a", "b")``; duplicates dropped, order kept, an empty list refused."""
    queues: list[str] = []
    for part in raw.split(","):
        queue = _queue_name(name, part)
        if queue not in queues:
            queues.append(queue)
    return tuple(queues)


def parse_strict_queues(name: str, raw: str) -> tuple[str, ...]:
    """``a,b`` → ``("a", "b")``, or ``("*",)`` for every queue served; duplicates dropped."""
    if raw.strip() == "*":
        return ("*",)
    return parse_queues(name, raw)


def parse_job_names(name: str, raw: str) -> tuple[str, ...]:
    """``a,b`` → ``("a", "b")``, or ``("*",)`` for every job; duplicates dropped, order kept."""
    names: list[str] = []
    for part in raw.split(","):
        job = part.strip()
        if not job or len(job.encode()) > MAX_JOB_NAME_BYTES:
            raise invalid(name, f"{part!r} is not a job name (1 to 200 bytes)", value=raw)
        if job not in names:
            names.append(job)
    if "*" in names and len(names) > 1:
        raise invalid(name, "'*' (every job) stands alone", value=raw)
    return tuple(names)


@dataclass(frozen=True, slots=True)
class Concurrency:
    """Slots per queue: ``default`` for a queue ``per_queue`` does not name."""

    default: int = JOBS_CONCURRENCY_DEFAULT
    per_queue: Mapping[str, int] = field(default_factory=dict)

    def for_queue(self, queue: str) -> int:
        return self.per_queue.get(queue, self.default)


def parse_concurrency(name: str, raw: str) -> Concurrency:
    """``8`` (every queue) or ``default=4,webhooks=2`` (per queue; others get 8)."""
    text = raw.strip()
    if "=" not in text:
        return Concurrency(default=whole(name, text, minimum=1))
    per_queue: dict[str, int] = {}
    for part in text.split(","):
        queue, sep, number = part.partition("=")
        if not sep:
            raise invalid(name, f"{part.strip()!r} is not queue=number (e.g. default=4,webhooks=2)")
        per_queue[_queue_name(name, queue)] = whole(name, number, minimum=1)
    return Concurrency(per_queue=per_queue)


def choice(name: str, raw: str, choices: tuple[str, ...]) -> str:
    value = raw.strip().lower()
    if value not in choices:
        raise invalid(
            name,
            f"{raw!r} is not one of {', '.join(choices)}" + did_you_mean(value, choices),
            value=raw,
        )
    return value


def app_spec(name: str, raw: str) -> str:
    value = raw.strip()
    module, sep, attr = value.partition(":")
    if not sep or not module or not attr:
        raise invalid(
            name,
            f"must be 'module:attribute' (the value define_api returned), e.g. "
            f"'myapp.jobs:api'; got {value!r}",
            value=value,
        )
    return value


def optional(parse: Callable[[str, str], T]) -> Callable[[str, str], T | None]:
    return parse


def public_base_url(name: str, raw: str) -> str:
    """An http(s) base URL the api's links start with: a host, at most a path prefix (its
    trailing ``/`` dropped), never credentials, a query or a fragment."""
    value = parse_url(name, raw, ("https", "http"))
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 (a port that is not a number raises here)
    except ValueError:
        raise invalid(name, f"{redact_url(value)!r} does not parse as a URL") from None
    if not parts.hostname or parts.username is not None or parts.password is not None:
        raise invalid(name, "a base URL names a host and carries no credentials")
    if parts.query or parts.fragment:
        raise invalid(name, "a base URL has no ?query or #fragment", value=redact_url(value))
    return f"{parts.scheme.lower()}://{parts.netloc}{parts.path.rstrip('/')}"


def whole_from(minimum: int) -> Callable[[str, str], int]:
    return lambda name, raw: whole(name, raw, minimum=minimum)


def urls(*schemes: str) -> Callable[[str, str], str | None]:
    return lambda name, raw: parse_url(name, raw, schemes)


def driver_name(name: str, raw: str) -> DriverName:
    return "redis" if choice(name, raw, DRIVERS) == "redis" else "postgres"


def tcp_port(name: str, raw: str) -> int:
    port = whole(name, raw)
    if port > 65_535:
        raise invalid(name, f"{port} is not a TCP port (0-65535)")
    return port


def purge_on(name: str, raw: str) -> bool:
    return choice(name, raw, ("on", "off")) == "on"


def cron_expression(name: str, raw: str) -> str:
    from ujobs.errors import TaskDeclarationInvalidError
    from ujobs.jobs.task import validate_cron

    try:
        return validate_cron("x.purge.cron", raw)
    except TaskDeclarationInvalidError as exc:
        raise invalid(name, exc.message.removeprefix("task 'x.purge.cron': ")) from None


def on_off(name: str, raw: str) -> bool:
    return choice(name, raw.strip().lower(), ("on", "off")) == "on"


def matching(pattern: str, what: str) -> Callable[[str, str], str]:
    """A value that, stripped, matches ``pattern`` whole; else "'<value>' is not <what>"."""
    compiled = re.compile(pattern)

    def parse(name: str, raw: str) -> str:
        value = raw.strip()
        if not compiled.fullmatch(value):
            raise invalid(name, f"{value!r} is not {what}")
        return value

    return parse


key_prefix = matching(r"[A-Za-z0-9_.:\-]{1,64}", "a key prefix (letters, digits, _ . : -)")
environment_name = matching(
    r"[A-Za-z0-9_.\-]{1,64}", "an environment name (letters, digits, _ . -)"
)
nats_prefix = matching(r"[A-Za-z0-9_\-]{1,32}", "a subject prefix (1-32 letters, digits, _ or -)")
host_name = matching(r"[A-Za-z0-9_.:\-\[\]]+", "a host name or address")
