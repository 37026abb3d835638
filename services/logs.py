"""Structured logs for the services: one JSON object per line on stderr.

Library code logs through the stdlib ``logging`` module with the event name as the message
(``jobs.scheduler.fired``) and its fields in ``extra``; this formatter puts both on one line, so
an operator greps for the event and a log pipeline reads the fields.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime
from typing import Any

import orjson

# Attributes every LogRecord has; anything else on a record came from ``extra``.
_STANDARD = frozenset(vars(logging.LogRecord("", logging.INFO, "", 0, "", None, None)).keys()) | {
    "message",
    "asctime",
    "taskName",
}


class JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "at": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STANDARD:
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=repr).decode()


def configure_logging(level: int | str = logging.INFO) -> None:
    """Send every ``ujobs.*`` log to stderr as JSON lines (idempotent). The records still
    propagate, so an app that configured the root logger sees them too."""
    root = logging.getLogger("ujobs")
    root.setLevel(level)
    if not any(isinstance(h.formatter, JsonLineFormatter) for h in root.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(JsonLineFormatter())
        root.addHandler(handler)
