"""A job's result: the body's return value, stored with its run as JSON.

The worker encodes the value once (``encode_result``) and the ack writes that text in the same
statement that settles the row ``done``, so a row is ``done`` exactly when its result is stored.
The encoded JSON is capped at ``result_max_bytes()`` (``UJOBS_RESULT_MAX_BYTES``, 256 KiB by
default): a bigger value is refused with ``X_RESULT_TOO_LARGE``, never truncated, and a value
JSON cannot carry with ``X_RESULT_INVALID``. Both are terminal: the attempt is dead-lettered,
since the same body returns the same value again. The value itself is never logged; only its
size and the limit are in the error.

``None`` (a body that returns nothing) is stored as no result, read back as ``None``.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

from ujobs.errors import (
    ConfigInvalidError,
    InputInvalidError,
    ResultInvalidError,
    ResultTooLargeError,
)
from ujobs.errors import StepOutputInvalidError as _StepOutputInvalid
from ujobs.execution.step_output import stored_form
from ujobs.jobs.schema import InputSchema

DEFAULT_RESULT_MAX_BYTES = 256 * 1024
RESULT_MAX_BYTES_ENV = "UJOBS_RESULT_MAX_BYTES"
_configured: int | None = None


def set_result_max_bytes(limit: int | None) -> None:
    """Set this process's limit (None: back to ``UJOBS_RESULT_MAX_BYTES`` or the default)."""
    global _configured
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ConfigInvalidError(
            "the result limit must be a positive number of bytes", meta={"limit": limit}
        )
    _configured = limit


def result_max_bytes() -> int:
    """The largest encoded result the worker stores, in bytes of UTF-8 JSON."""
    if _configured is not None:
        return _configured
    raw = os.environ.get(RESULT_MAX_BYTES_ENV)
    if raw is None or raw == "":
        return DEFAULT_RESULT_MAX_BYTES
    if not (raw.isascii() and raw.isdigit()) or int(raw) < 1:
        raise ConfigInvalidError(
            f"{RESULT_MAX_BYTES_ENV} must be a positive whole number of bytes",
            meta={"variable": RESULT_MAX_BYTES_ENV, "value": raw[:40]},
        )
    return int(raw)


def encode_result(
    job: str,
    value: Any,
    *,
    max_bytes: int | None = None,
    schema: InputSchema[Any] | None = None,
) -> str | None:
    """``value`` as the stored JSON text (None for ``None``), or refused. ``schema`` (the job's
    declared ``output``) checks it and gives its stored form."""
    if value is None:
        return None
    try:
        plain = stored_form("result", value)
    except _StepOutputInvalid as exc:
        raise ResultInvalidError(
            f"job {job!r} returned a value JSON cannot store; return dicts, lists, strings, "
            "numbers, booleans, None, dataclasses or pydantic models",
            meta={"job": job, "type": type(value).__name__},
        ) from exc
    if schema is not None:
        try:
            plain = schema.dump(schema.parse(plain))
        except InputInvalidError as exc:
            raise ResultInvalidError(
                f"job {job!r} returned a value that is not its declared output: {exc.message}",
                meta={"job": job, "issues": exc.meta.get("issues", [])},
            ) from None
    if plain is None:
        return None
    encoded = orjson.dumps(plain)
    limit = result_max_bytes() if max_bytes is None else max_bytes
    size = len(encoded)
    if size > limit:
        raise ResultTooLargeError(
            f"job {job!r} returned {size} bytes of JSON; a stored result holds at most {limit} "
            f"({RESULT_MAX_BYTES_ENV}): store the output elsewhere and return its key",
            meta={"job": job, "bytes": size, "maxBytes": limit},
        )
    return encoded.decode()


__all__ = [
    "DEFAULT_RESULT_MAX_BYTES",
    "RESULT_MAX_BYTES_ENV",
    "encode_result",
    "result_max_bytes",
    "set_result_max_bytes",
]
