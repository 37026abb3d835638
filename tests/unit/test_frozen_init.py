"""``slot_init`` builds the same frozen instances as the dataclass's own ``__init__``."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field

import pytest

from ujobs.drivers.records import ClaimedJob, ClaimRef, Enqueued
from ujobs.execution.frozen_init import _twin, slot_init
from ujobs.execution.outcome import JobExecution
from ujobs.execution.run import Run


@dataclass(frozen=True, slots=True)
class Plain:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


@slot_init
@dataclass(frozen=True, slots=True)
class Fast:
    a: int
    b: str = "b"
    c: tuple[int, ...] = ()


def test_same_fields_defaults_equality_and_hash() -> None:
    fast = Fast(1)
    assert (fast.a, fast.b, fast.c) == (1, "b", ())
    assert Fast(1, c=(2,)) == Fast(a=1, b="b", c=(2,))
    assert hash(Fast(1)) == hash(Fast(1))
    assert repr(Fast(1, "x")) == "Fast(a=1, b='x', c=())"
    assert str(inspect.signature(Fast)) == str(inspect.signature(Plain))
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.a = 2  # type: ignore[misc]


def test_still_frozen_and_replace_works() -> None:
    ref = ClaimRef("w1", 3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        ref.claim = 4  # type: ignore[misc]
    assert dataclasses.replace(ref, claim=4) == ClaimRef("w1", 4)
    execution = JobExecution(
        outcome="completed",
        job_id="j",
        run_id="r",
        name="n",
        queue="q",
        attempt=1,
        settled=True,
        duration_ms=2,
    )
    assert execution.abandoned is False
    assert execution.result is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        execution.settled = False  # type: ignore[misc]


def test_an_enqueue_answer_is_built_by_its_slots() -> None:
    answer = Enqueued("j", "r", False)
    assert answer == Enqueued(id="j", run_id="r", deduped=False, debounced=False)
    assert hash(answer) == hash(Enqueued("j", "r", False))
    assert dataclasses.replace(answer, deduped=True) == Enqueued("j", "r", True)
    with pytest.raises(dataclasses.FrozenInstanceError):
        answer.deduped = True  # type: ignore[misc]
    # built by slot_init: the dataclass's own __init__ writes through object.__setattr__
    assert Enqueued.__init__.__qualname__ == "Enqueued.__init__"
    assert "_set0" in Enqueued.__init__.__code__.co_names


def test_missing_argument_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        ClaimedJob(id="x")  # type: ignore[call-arg]


def test_refuses_what_it_cannot_build() -> None:
    @dataclass(frozen=True, slots=True)
    class WithFactory:
        items: list[int] = field(default_factory=list)

    @dataclass(slots=True)
    class NotFrozen:
        a: int

    @dataclass(frozen=True)
    class NoSlots:
        a: int

    for cls in (WithFactory, NotFrozen, NoSlots):
        with pytest.raises(TypeError):
            slot_init(cls)


def test_refuses_an_init_var() -> None:
    @dataclass(frozen=True, slots=True)
    class WithInitVar:
        a: int
        scale: dataclasses.InitVar[int] = 1

    with pytest.raises(TypeError):
        slot_init(WithInitVar)


class FastChild(Fast):
    """A subclass: its instances are written slot by slot (the twin has the parent's layout)."""

    __slots__ = ("d",)


def test_an_instance_is_of_its_own_class_after_init_and_a_subclass_still_builds() -> None:
    fast = Fast(1, "x")
    assert type(fast) is Fast
    child = FastChild(2)
    assert type(child) is FastChild
    assert (child.a, child.b, child.c) == (2, "b", ())
    with pytest.raises(dataclasses.FrozenInstanceError):
        child.a = 3  # type: ignore[misc]


def test_a_generic_frozen_class_gets_the_twin_too() -> None:
    twin = _twin(Run)
    assert twin is not None
    assert twin.__slots__ == Run.__slots__
