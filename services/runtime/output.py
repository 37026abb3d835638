"""How every ``ujobs`` command talks: JSON or an aligned table on stdout, errors and progress on
stderr, exit codes that a script can branch on.

* ``--json``: one JSON document on stdout — the answer, or ``{"error": {code, message, meta}}``.
* otherwise: an aligned table (plain text, no box drawing, so it greps and pipes) on stdout.
* an expected error: ``X_CODE: what happened; what to do`` on stderr, exit 1.
* anything else: ONE line, ``X_INTERNAL: …; rerun with --debug for the detail``, exit 70 — a
  stack trace is for ``ujobs --debug``, not for an operator at 3 a.m.
* a command still working after a second shows it on stderr (a spinner on a terminal, a line
  otherwise), so a slow database never looks like a hung command.

Every string printed goes through ``redact_text``: a driver's error may quote its URL.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import orjson
import typer
from rich.console import Console
from rich.status import Status

from ujobs.errors import DriverUnavailableError, UltimateError
from ujobs.services.redact import redact_text, redact_value

EXIT_ERROR = 1
EXIT_INTERNAL = 70
PROGRESS_AFTER_S = 1.0

_debug = False


def set_debug(on: bool) -> None:
    global _debug
    _debug = on


def debug_enabled() -> bool:
    return _debug


# --- answers ----------------------------------------------------------------------------------


def emit_json(value: Any) -> None:
    text = orjson.dumps(redact_value(value), option=orjson.OPT_INDENT_2).decode()
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Columns padded to their widest cell, two spaces apart; None prints as ``-``."""
    cells = [[str(h) for h in headers]] + [
        ["-" if c is None or c == "" else redact_text(str(c)) for c in row] for row in rows
    ]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    for row in cells:
        line = "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip()
        sys.stdout.write(line + "\n")
    sys.stdout.flush()


def print_fields(fields: Sequence[tuple[str, Any]]) -> None:
    """``label  value`` pairs, labels aligned (``ujobs jobs show``)."""
    width = max((len(k) for k, _ in fields), default=0)
    for key, value in fields:
        shown = "-" if value is None or value == "" else redact_text(str(value))
        sys.stdout.write(f"{key.ljust(width)}  {shown}\n")
    sys.stdout.flush()


def note(message: str) -> None:
    """A remark for a person (a next-page hint, "no jobs match") on stderr."""
    sys.stderr.write(redact_text(message) + "\n")
    sys.stderr.flush()


# --- time, for people ---------------------------------------------------------------------------


def when(ms: int | None, now_ms: int) -> str | None:
    """``3s ago`` / ``in 2m`` for a table; None stays None."""
    if ms is None:
        return None
    delta = (now_ms - ms) / 1000
    text = _span(abs(delta))
    return "now" if text == "0s" else (f"{text} ago" if delta >= 0 else f"in {text}")


def duration(ms: int | None) -> str | None:
    if ms is None:
        return None
    return f"{ms}ms" if ms < 1000 else _span(ms / 1000)


def _span(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def iso(ms: int | None) -> str | None:
    if ms is None:
        return None
    return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="seconds")


# --- errors -----------------------------------------------------------------------------------


def fail(error: UltimateError, *, as_json: bool, exit_code: int = EXIT_ERROR) -> None:
    """Print the error as its code and a sentence (or JSON on stdout) and exit non-zero."""
    if as_json:
        emit_json({"error": error.to_dict()})
    else:
        sys.stderr.write(redact_text(f"{error.code}: {error.message}") + "\n")
        sys.stderr.flush()
    raise typer.Exit(code=exit_code)


def backend_error(exc: BaseException) -> UltimateError | None:
    """A database or Redis failure as the ``X_…`` error an operator can act on, or None."""
    import asyncpg

    if isinstance(exc, asyncpg.UndefinedTableError):
        return DriverUnavailableError(
            f"the ujobs schema is not in this database ({exc}); run `ujobs db migrate`",
            meta={"cause": type(exc).__name__},
        )
    if isinstance(
        exc, asyncpg.InvalidCatalogNameError | asyncpg.InvalidAuthorizationSpecificationError
    ):
        return DriverUnavailableError(
            f"Postgres refused the connection ({exc}); check DATABASE_URL",
            meta={"cause": type(exc).__name__},
        )
    if isinstance(exc, asyncpg.PostgresError | asyncpg.InterfaceError):
        return DriverUnavailableError(
            f"Postgres answered with an error: {exc}", meta={"cause": type(exc).__name__}
        )
    try:
        from redis.exceptions import RedisError
    except ImportError:  # pragma: no cover - redis is a dependency
        RedisError = ()  # type: ignore[assignment,misc]
    if isinstance(exc, RedisError):
        return DriverUnavailableError(
            f"Redis could not be reached or refused the command ({exc}); check REDIS_URL",
            meta={"cause": type(exc).__name__},
        )
    files = FileNotFoundError | IsADirectoryError | NotADirectoryError | PermissionError
    if isinstance(exc, OSError | TimeoutError) and not isinstance(exc, files | LookupError):
        # (a file or a template the command could not open is not the backend away)
        return DriverUnavailableError(
            f"could not reach the backend ({type(exc).__name__}: {exc}); is it running, and "
            "are DATABASE_URL / REDIS_URL right?",
            meta={"cause": type(exc).__name__},
        )
    return None


class reported:
    """Turn whatever a command raises into its printed error and exit code.

    A class (not ``@contextmanager``) so its ``__exit__`` is typed as never swallowing: code
    after a ``with reported(...)`` block that returns is known unreachable on error.
    """

    def __init__(self, *, as_json: bool) -> None:
        self.as_json = as_json

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        if exc is None or isinstance(exc, typer.Exit | typer.Abort):
            return
        if isinstance(exc, UltimateError):
            fail(exc, as_json=self.as_json)
        if isinstance(exc, KeyboardInterrupt):
            raise typer.Exit(code=130) from None
        if not isinstance(exc, Exception):
            return
        known = backend_error(exc)
        if known is not None:
            fail(known, as_json=self.as_json)
        if _debug:
            return
        fail(
            UltimateError(
                f"unexpected {type(exc).__name__}: {exc}; rerun with `ujobs --debug …` for the "
                "detail and report it",
                meta={"type": type(exc).__name__},
            ),
            as_json=self.as_json,
            exit_code=EXIT_INTERNAL,
        )


# --- progress -----------------------------------------------------------------------------------


class Progress:
    """Shows ``label`` on stderr once the work has run ``after_s`` seconds, until it ends.

    A terminal gets rich's spinner (cleared when done); a pipe or a log gets one plain line per
    label, so a CI log says what a slow command was waiting on. Runs on a timer thread: the
    work itself may block the event loop (an embedded Postgres starting, a slow statement).
    """

    def __init__(self, label: str, *, after_s: float = PROGRESS_AFTER_S) -> None:
        self.label = label
        self.after_s = after_s
        self._console = Console(stderr=True)
        self._lock = threading.Lock()
        self._timer: threading.Timer | None = None
        self._status: Status | None = None
        self._shown = False
        self._done = False

    def __enter__(self) -> Progress:
        self._timer = threading.Timer(self.after_s, self._show)
        self._timer.daemon = True
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            self._done = True
            if self._timer is not None:
                self._timer.cancel()
            if self._status is not None:
                self._status.stop()

    def update(self, label: str) -> None:
        with self._lock:
            self.label = label
            if not self._shown or self._done:
                return
            if self._status is not None:
                self._status.update(label)
            else:
                self._line(label)

    def _show(self) -> None:
        with self._lock:
            if self._done:
                return
            self._shown = True
            if self._console.is_terminal:
                self._status = self._console.status(self.label)
                self._status.start()
            else:
                self._line(self.label)

    def _line(self, label: str) -> None:
        sys.stderr.write(f"ujobs: {redact_text(label)} …\n")
        sys.stderr.flush()
