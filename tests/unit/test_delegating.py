"""The delegating base is written once and whole: every member of ``JobDriver`` and of
``JobIntrospection`` is passed through, the announcing wrapper overrides only what announces,
and a wrapped driver still answers the capabilities the scheduler and the relay ask about."""

from __future__ import annotations

from typing import Any

from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    JobDriver,
    JobIntrospection,
    announces_enqueues,
    stores_in,
)
from ujobs.drivers.delegating import DelegatingDriver, DelegatingIntrospection
from ujobs.drivers.memory.driver import memory_driver
from ujobs.wake.announce import AnnouncingDriver, announcing
from ujobs.wake.announce_introspect import AnnouncingIntrospection


def _members(protocol: type) -> set[str]:
    return {
        name
        for name in protocol.__dict__
        if not name.startswith("_") and name not in ("name", "clock")
    } | set(getattr(protocol, "__annotations__", {})) - {"name", "clock"}


def _overrides(cls: type, base: type) -> set[str]:
    return {name for name in cls.__dict__ if not name.startswith("_") and name in dir(base)}


def test_the_delegating_driver_passes_every_member_through() -> None:
    assert _members(JobDriver) <= set(DelegatingDriver.__dict__)


def test_the_delegating_introspection_passes_every_member_through() -> None:
    assert _members(JobIntrospection) <= set(DelegatingIntrospection.__dict__)


def test_the_announcing_wrappers_override_only_what_announces() -> None:
    assert _overrides(AnnouncingDriver, DelegatingDriver) == {
        "enqueue",
        "enqueue_many",
        "introspect",
        "results",
    }
    assert _overrides(AnnouncingIntrospection, DelegatingIntrospection) == {
        "requeue",
        "promote",
        "requeue_many",
        "promote_many",
        "resume_queue",
    }


class _PoolBacked(DelegatingDriver):
    """A driver that says which handle its rows live behind, as the Postgres driver does."""

    def __init__(self, inner: JobDriver, pool: object) -> None:
        super().__init__(inner)
        self.pool = pool

    def stores_in(self, executor: object) -> bool:
        return executor is self.pool


def test_a_wrapped_driver_answers_the_capabilities_of_the_one_it_wraps() -> None:
    pool = object()
    backed = _PoolBacked(memory_driver(), pool)
    wrapped = announcing(backed)
    assert stores_in(wrapped, pool)
    assert not stores_in(wrapped, object())
    assert announces_enqueues(wrapped)
    assert not announces_enqueues(backed)
    assert not stores_in(memory_driver(), pool)  # a driver that cannot say answers False


async def test_a_delegated_call_reaches_the_inner_driver() -> None:
    inner = memory_driver(clock=FrozenClock(1_000))
    outer: Any = DelegatingDriver(inner)
    assert outer.name == "memory"
    assert outer.clock is inner.clock
    assert outer.introspect is inner.introspect
    assert (await outer.stats()).queues == (await inner.stats()).queues
