"""``ujobs.limits`` through the Python API: ``job.request`` (every enqueue's path) and
``publish_event`` refuse an input or a payload nested past ``MAX_JSON_DEPTH`` and a text
field past its UTF-8 bytes with ``X_INPUT_INVALID``, before pydantic or orjson walk it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from ujobs import Run, job, t
from ujobs.errors import (
    IdempotencyRequiredError,
    InputInvalidError,
    JobConcurrencyKeyInvalidError,
)
from ujobs.events.bus import MemoryEventBus
from ujobs.jobs.job import JobHandle, RunFn
from ujobs.limits import (
    MAX_JSON_DEPTH,
    TEXT_LIMITS,
    check_text,
    json_depth_over,
    text_problem,
)

ORG = "0b6c3f0e-8f5c-4f43-9d77-4b6a3a1c8e10"


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


def open_job(input: Any = None, **overrides: Any) -> JobHandle[Any]:
    options: dict[str, Any] = {
        "input": input or t.object(tenant=t.string, key=t.string, data=t.optional(t.any)),
        "idempotency_key": lambda i: i.key,
        "tenant": lambda i: i.tenant,
    }
    options.update(overrides)
    declare: Callable[[RunFn], JobHandle[Any]] = job(**options)

    @declare
    async def take_anything(run: Run[Any]) -> None:
        """Take whatever data holds."""

    return take_anything


def value(data: Any = None, **fields: Any) -> dict[str, Any]:
    return {"tenant": ORG, "key": "k", "data": data, **fields}


def test_the_walk_counts_levels_and_needs_no_recursion() -> None:
    assert not json_depth_over(nested(MAX_JSON_DEPTH))
    assert json_depth_over(nested(MAX_JSON_DEPTH + 1))
    assert not json_depth_over({"a": ({"b": [1]},)}, limit=4)
    assert json_depth_over({"a": ({"b": [1]},)}, limit=3)
    assert not json_depth_over("a string, whatever its length" * 1000)
    assert json_depth_over(nested(1_000_000))  # past Python's recursion limit, no RecursionError
    cycle: list[Any] = []
    cycle.append(cycle)
    assert json_depth_over(cycle)


@pytest.mark.parametrize("depth", [MAX_JSON_DEPTH, 100, 300, 5000])
def test_an_input_nested_past_the_limit_is_input_invalid(depth: int) -> None:
    # The input object is a level of its own: data holds the rest.
    with pytest.raises(InputInvalidError) as info:
        open_job().request(value(nested(depth)))
    assert info.value.meta["maxDepth"] == MAX_JSON_DEPTH
    assert open_job().request(value(nested(MAX_JSON_DEPTH - 1))).input["data"] is not None


class Loose(BaseModel):
    tenant: str
    key: str
    data: Any = None


@pytest.mark.parametrize("depth", [100, 300])
def test_a_model_instance_is_held_to_the_limit_in_its_stored_form(depth: int) -> None:
    handle = open_job(input=Loose)
    with pytest.raises(InputInvalidError):
        handle.request(Loose(tenant=ORG, key="k", data=nested(depth)))


def test_text_fields_count_utf8_bytes_and_refuse_nul_and_lone_surrogates() -> None:
    limit = TEXT_LIMITS["runId"]
    assert text_problem("r" * limit, limit) is None
    assert text_problem("é" * (limit // 2), limit) is None
    assert text_problem("é" * (limit // 2 + 1), limit) is not None
    assert text_problem("a\x00b", limit) is not None
    assert text_problem("\ud800", limit) is not None
    assert text_problem("", limit) is not None
    with pytest.raises(InputInvalidError) as info:
        check_text("runId", "🙂" * 51)
    assert info.value.meta["issues"][0]["path"] == "runId"


@pytest.mark.parametrize(
    ("fields", "run_id", "error"),
    [
        ({"tenant": "t" * 3000}, None, InputInvalidError),
        ({"tenant": "é" * 101}, None, InputInvalidError),
        ({"tenant": "a\x00b"}, None, InputInvalidError),
        ({"key": "🙂" * 126}, None, IdempotencyRequiredError),
        ({}, "é" * 101, InputInvalidError),
        ({}, "r" * 201, InputInvalidError),
    ],
    ids=["tenant-3000", "tenant-bytes", "tenant-nul", "key-bytes", "runId-bytes",
         "runId-201"],
)  # fmt: skip
def test_a_text_field_past_its_limit_is_refused_at_request(
    fields: dict[str, Any], run_id: str | None, error: type[Exception]
) -> None:
    with pytest.raises(error):
        open_job().request(value(**fields), run_id=run_id)


@pytest.mark.parametrize("key", ["k" * 501, "k\x00", "\ud800"], ids=["501", "nul", "surrogate"])
def test_a_key_passed_by_the_caller_is_held_to_the_same_limit(key: str) -> None:
    with pytest.raises(IdempotencyRequiredError):
        open_job().request(value(), idempotency_key=key)


def test_a_concurrency_key_counts_bytes() -> None:
    handle = open_job(concurrency={"key": lambda i: "é" * 101, "limit": 1})
    with pytest.raises(JobConcurrencyKeyInvalidError):
        handle.request(value())


async def test_an_event_payload_nested_past_the_limit_is_input_invalid() -> None:
    bus = MemoryEventBus()
    await bus.publish("approved", nested(MAX_JSON_DEPTH))
    with pytest.raises(InputInvalidError) as info:
        await bus.publish("approved", nested(MAX_JSON_DEPTH + 1))
    assert info.value.meta["maxDepth"] == MAX_JSON_DEPTH


class _Mapping(dict[str, object]):
    """A dict subclass: not one of the exact scalar types the flat walk skips."""


@pytest.mark.parametrize(
    ("value", "limit", "over"),
    [
        ({"a": 1, "b": "x", "c": 2.5, "d": True, "e": None}, 1, False),
        ({"a": 1}, 0, True),
        ({}, 1, False),
        ({"a": _Mapping(b=_Mapping(c=1))}, 2, True),
        ({"a": _Mapping(b=_Mapping(c=1))}, 3, False),
        ({"a": 1, "b": ((1,),)}, 2, True),
        ({"a": 1, "b": [[1]]}, 3, False),
    ],
)
def test_an_object_of_scalars_is_one_level_and_any_container_in_it_is_walked(
    value: dict[str, object], limit: int, over: bool
) -> None:
    assert json_depth_over(value, limit) is over
