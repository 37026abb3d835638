"""What a step stores: its result as JSON, read back — or ``X_STEP_OUTPUT_INVALID``.

The step answers this stored form on every path (first run and replay alike), so a body never
sees a type on attempt 1 that attempt 2 cannot reproduce. orjson writes dataclasses, ``datetime``,
``UUID`` and enums natively; a pydantic model is written as ``model_dump(mode="json")``. A value
JSON cannot carry is refused with the step's name — including NaN and Infinity, which orjson
would otherwise write as ``null`` and lose silently.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import orjson
from pydantic import BaseModel

from ujobs.errors import StepOutputInvalidError

JSONValue = Any


def _finite_check(value: Any, step: str, depth: int = 0) -> None:
    """orjson writes NaN and Infinity as ``null``; refuse them instead of losing them."""
    if depth > 200:
        return  # orjson refuses deeper nesting itself, with a clear message
    if isinstance(value, float):
        if not math.isfinite(value):
            raise StepOutputInvalidError(
                f"step {step!r} returned a non-finite number ({value}); JSON cannot store it",
                meta={"step": step},
            )
    elif isinstance(value, dict):
        for item in value.values():
            _finite_check(item, step, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            _finite_check(item, step, depth + 1)
    elif isinstance(value, BaseModel):
        for item in dict(value).values():
            _finite_check(item, step, depth + 1)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        for f in dataclasses.fields(value):
            _finite_check(getattr(value, f.name), step, depth + 1)


def _default(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    raise TypeError(f"Type is not JSON serializable: {type(value).__name__}")


def stored_form(step: str, value: Any) -> JSONValue:
    """``value`` as a step record stores it: JSON written and read back, or refused."""
    _finite_check(value, step)
    try:
        return orjson.loads(orjson.dumps(value, default=_default))
    except TypeError as exc:
        raise StepOutputInvalidError(
            f"step {step!r} returned a value JSON cannot store ({exc}); return dicts, lists, "
            "strings, numbers, booleans, None, dataclasses or pydantic models",
            meta={"step": step, "type": type(value).__name__},
        ) from None


def copy_output(value: JSONValue) -> JSONValue:
    """An equal, independent copy of a stored output (a body may mutate what it got)."""
    return orjson.loads(orjson.dumps(value))
