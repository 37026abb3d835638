"""Structured logs for the services: one JSON object per line, never a secret.

The library logs through the stdlib ``logging`` module with the spec's event name as the
message (``jobs.worker.drain-abandoned``) and its fields in ``extra``. This formatter puts both
on one line — ``{"ts", "level", "event", "service", "logger", ...fields}`` — so an operator
greps for the event and a pipeline reads the fields. Every string on the line (the event, each
field, an exception's text) goes through ``redact_text`` first: a connection URL with its
password in an asyncpg error, or a config dump, cannot leak through a log line.

Lines go to stderr, so a command's stdout stays its answer (``ujobs dev`` prints its
human-readable progress there).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import orjson

from ujobs.services.redact import redact_text, redact_value

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None))) | {
    "message",
    "asctime",
    "taskName",
}


def _json_default(value: Any) -> Any:
    if isinstance(value, BaseException):
        code = getattr(value, "code", None)
        text = f"{type(value).__name__}: {value}"
        return {"code": code, "message": text} if isinstance(code, str) else text
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return repr(value)


class JsonLineFormatter(logging.Formatter):
    """``{"ts", "level", "event", "service", "logger", ...extra}`` on one line, redacted."""

    def __init__(self, service: str, *, tracebacks: bool = True) -> None:
        super().__init__()
        self.service = service
        self.tracebacks = tracebacks

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, tz=UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "service": self.service,
            "logger": record.name,
        }
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in line:
                line[key] = value
        if self.tracebacks and record.exc_info and record.exc_info[0] is not None:
            line["exception"] = self.formatException(record.exc_info)
        # Round-trip through JSON first so exceptions and odd objects are text, then mask.
        plain = orjson.loads(orjson.dumps(line, default=_json_default))
        return orjson.dumps(redact_value(plain)).decode()


_handlers: dict[int, logging.Handler] = {}


def configure_logging(
    service: str, level: int | str = logging.INFO, *, stream: IO[str] | None = None
) -> logging.Handler:
    """Send every log of this process to ``stream`` (stderr) as JSON lines, at ``level``.

    Idempotent per stream: a second call re-labels and re-levels the one handler. Installed
    on the root logger, so aiohttp's and asyncpg's own warnings become JSON lines too.
    """
    target = stream if stream is not None else sys.stderr
    root = logging.getLogger()
    handler = _handlers.get(id(target))
    if handler is None or handler not in root.handlers:
        handler = logging.StreamHandler(target)
        _handlers[id(target)] = handler
        root.addHandler(handler)
    handler.setFormatter(JsonLineFormatter(service))
    numeric = level if isinstance(level, int) else logging.getLevelName(level.upper())
    root.setLevel(numeric)
    logging.getLogger("ujobs").setLevel(numeric)
    # aiohttp logs every request at info; the api's own lines say what matters.
    logging.getLogger("aiohttp.access").setLevel(max(numeric, logging.WARNING))
    return handler


def log_to_file(service: str, path: Path, level: int) -> logging.Handler:
    """Also write every line (tracebacks included) to ``path``, appended, at ``level``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(JsonLineFormatter(service))
    handler.setLevel(level)
    logging.getLogger().addHandler(handler)
    return handler


def log_event(
    logger: logging.Logger, level: int, event: str, fields: Mapping[str, Any] | None = None
) -> None:
    """``logger.log(level, event, extra=fields)`` — for call sites that build fields."""
    logger.log(level, event, extra=dict(fields or {}))


__all__ = ["JsonLineFormatter", "configure_logging", "log_event", "log_to_file", "redact_text"]
