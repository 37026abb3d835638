"""``EnqueueRequest``'s ``__init__`` is ``slot_init``'s (speed, see ujobs.execution.frozen_init):
it must stay exactly the dataclass's fields, in order, with their defaults, and the value frozen."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from ujobs.drivers.records import EnqueueRequest


def test_the_init_takes_the_fields_in_order_with_their_defaults() -> None:
    params = list(inspect.signature(EnqueueRequest.__init__).parameters.values())[1:]
    fields = dataclasses.fields(EnqueueRequest)
    assert [p.name for p in params] == [f.name for f in fields]
    assert [p.default for p in params] == [
        inspect.Parameter.empty if f.default is dataclasses.MISSING else f.default for f in fields
    ]


def test_a_request_is_a_frozen_value() -> None:
    a = EnqueueRequest("send", {"k": 1}, "key", "q", None, 5, 10, "id", "run", "tp", "me")
    b = EnqueueRequest(
        name="send",
        input={"k": 1},
        idempotency_key="key",
        queue="q",
        max_attempts=5,
        run_at_ms=10,
        id="id",
        run_id="run",
        traceparent="tp",
        enqueued_by="me",
    )
    assert a == b
    assert dataclasses.astuple(a) == (
        "send",
        {"k": 1},
        "key",
        "q",
        None,
        5,
        10,
        "id",
        "run",
        "tp",
        "me",
        None,
        None,
        0,
        None,
        None,
    )
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.name = "other"  # type: ignore[misc]
    moved = dataclasses.replace(a, queue="other")
    assert (moved.queue, moved.name, a.queue) == ("other", "send", "q")
    assert EnqueueRequest("send", None, "key").queue == "default"
    assert hash(EnqueueRequest("send", 1, "key")) == hash(EnqueueRequest("send", 1, "key"))
