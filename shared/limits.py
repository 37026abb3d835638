"""What a caller may send: the one table of limits every edge checks (HTTP, NATS, Python).

A value past a limit is refused with ``X_INPUT_INVALID`` (400) naming the field, before any
statement runs and before pydantic or orjson walk it:

| Limit | Value | Why this number |
|---|---|---|
| ``MAX_JSON_DEPTH`` | 64 levels of arrays and objects in a job's input or an event's payload | pydantic's serializer and orjson's encoder stop near 255 levels with errors of their own; real inputs nest a handful of levels |
| ``TEXT_LIMITS`` | UTF-8 bytes of a tenant, queue, job name, idempotency key, runId, concurrency key, event name, webhook endpoint id, parentId | the live-key index holds (name, tenant, key): 200 + 200 + 500 bytes, well under the ~2,700 bytes a Postgres btree row may take, whatever the characters |

Lengths are counted in UTF-8 bytes, not characters: a Postgres index holds bytes, and a
limit in characters lets four-byte characters past it four times over. An ASCII value's
bytes are its characters. A text value also may not hold a NUL character (Postgres stores
none) nor a lone surrogate (it has no UTF-8 form).
"""  # noqa: E501

from __future__ import annotations

from typing import Any

from ujobs.errors import InputInvalidError

MAX_JSON_DEPTH = 64
"""The deepest a job's input or an event's payload nests (``[[1]]`` is 2 levels)."""

TEXT_LIMITS: dict[str, int] = {
    "tenant": 200,
    "queue": 200,
    "name": 200,
    "idempotencyKey": 500,
    "runId": 200,
    "concurrencyKey": 200,
    "eventName": 200,
    "endpointId": 200,
    "parentId": 200,
}
"""The most UTF-8 bytes each text field takes, keyed by its name on the wire."""

_ORJSON_DEPTH_MESSAGE = "depth limit exceeded"
_SCALARS = frozenset({str, int, float, bool, type(None)})
"""Types that are never a container (exact types: a subclass goes through isinstance)."""

MAX_TENANT_BYTES = TEXT_LIMITS["tenant"]
MAX_QUEUE_BYTES = TEXT_LIMITS["queue"]
MAX_JOB_NAME_BYTES = TEXT_LIMITS["name"]
MAX_IDEMPOTENCY_KEY_BYTES = TEXT_LIMITS["idempotencyKey"]
MAX_RUN_ID_BYTES = TEXT_LIMITS["runId"]
MAX_CONCURRENCY_KEY_BYTES = TEXT_LIMITS["concurrencyKey"]
MAX_EVENT_NAME_BYTES = TEXT_LIMITS["eventName"]


def text_problem(value: object, max_bytes: int) -> str | None:
    """Why ``value`` is not a text field of at most ``max_bytes`` (None: it is one)."""
    if not isinstance(value, str) or not value:
        return "must be a non-empty string"
    if value.isascii():
        size = len(value)
    else:
        try:
            size = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            return "holds a lone surrogate, which has no UTF-8 form"
    if size > max_bytes:
        return f"is {size} bytes of UTF-8; the most is {max_bytes}"
    if "\x00" in value:
        return "holds a NUL character, which cannot be stored"
    return None


def check_text(field: str, value: object) -> str:
    """``value`` when it is a text ``field`` within ``TEXT_LIMITS``; else ``X_INPUT_INVALID``."""
    max_bytes = TEXT_LIMITS[field]
    problem = text_problem(value, max_bytes)
    if problem is not None:
        raise InputInvalidError(
            f"{field} {problem}",
            meta={"issues": [{"path": field, "message": problem}], "maxBytes": max_bytes},
        )
    assert isinstance(value, str)
    return value


def json_depth_over(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether ``value`` nests more than ``limit`` levels of lists, tuples and dicts.

    Iterative, so a value nested a million deep costs a walk, never Python's recursion; it
    stops at the first container past ``limit``. Each level's containers wait on a stack
    with their depth; a scalar costs one type check."""
    if not isinstance(value, (dict, list, tuple)):
        return False
    if type(value) is dict:
        # Most inputs: one object of scalars (a batch enqueue walks one per row). A JSON
        # scalar's exact type is found in a set for less than isinstance asks of three types.
        for child in value.values():
            if type(child) not in _SCALARS and isinstance(child, (dict, list, tuple)):
                break
        else:
            return limit < 1
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            if isinstance(child, (dict, list, tuple)):
                stack.append((child, depth + 1))
    return False


def depth_refused(what: str, path: str) -> InputInvalidError:
    """The refusal of a value nested past ``MAX_JSON_DEPTH`` (``what``: "input", "payload")."""
    message = f"nests deeper than {MAX_JSON_DEPTH} levels of arrays and objects"
    return InputInvalidError(
        f"{what} {message}; flatten it",
        meta={
            "issues": [{"path": path, "message": message, "type": "depth"}],
            "maxDepth": MAX_JSON_DEPTH,
        },
    )


def too_deep_to_parse(exc: ValueError) -> bool:
    """Whether orjson refused a document for nesting past its own 1,024 levels: the edges
    answer it as the depth limit it is (``depth_refused``), not as text that is not JSON."""
    return getattr(exc, "msg", None) == _ORJSON_DEPTH_MESSAGE


def check_depth(value: Any, what: str, path: str = "(root)") -> None:
    """Refuse ``value`` (``X_INPUT_INVALID``) when it nests past ``MAX_JSON_DEPTH``."""
    if json_depth_over(value):
        raise depth_refused(what, path)


__all__ = [
    "MAX_CONCURRENCY_KEY_BYTES",
    "MAX_EVENT_NAME_BYTES",
    "MAX_IDEMPOTENCY_KEY_BYTES",
    "MAX_JOB_NAME_BYTES",
    "MAX_JSON_DEPTH",
    "MAX_QUEUE_BYTES",
    "MAX_RUN_ID_BYTES",
    "MAX_TENANT_BYTES",
    "TEXT_LIMITS",
    "check_depth",
    "check_text",
    "depth_refused",
    "json_depth_over",
    "text_problem",
    "too_deep_to_parse",
]
