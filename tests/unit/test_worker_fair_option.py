"""``job_worker(fair=...)`` and ``UJOBS_STRICT_QUEUES``: which queues a worker claims first-in
first-out (``ClaimOptions.strict_queues``), every other one tenant-fair; a bad value fails at
construction naming the option."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.worker import Gate, declare, enqueue, frozen, make_worker, row
from ujobs.drivers.memory.driver import MemoryDriver
from ujobs.errors import ConfigInvalidError, InvariantError
from ujobs.services.config.settings import WorkerConfig
from ujobs.worker.options import build_options

PG = "postgresql://u@h/db"


def _options(**kw: Any) -> Any:
    base: dict[str, Any] = {
        "queues": ["mail", "bulk"],
        "registered_queues": [],
        "concurrency": 4,
        "max_in_flight": None,
        "limits": None,
        "visibility_timeout_ms": 30_000,
        "heartbeat_interval_ms": None,
        "poll_interval_ms": 250,
        "idle_poll_max_ms": None,
        "drain_on_shutdown": True,
        "close_driver": True,
        "worker_id": "w",
    }
    return build_options(**{**base, **kw})


def test_fair_by_default_strict_when_asked_per_queue_or_whole() -> None:
    assert _options().strict_queues == frozenset()
    assert _options(fair=False).strict_queues == {"mail", "bulk"}
    assert _options(fair={"bulk": False, "mail": True}).strict_queues == {"bulk"}


@pytest.mark.parametrize(
    ("fair", "option"),
    [("no", "fair"), ({"bulk": "no"}, "fair['bulk']"), ({"other": False}, "fair")],
)
def test_a_bad_fair_value_is_refused_naming_the_option(fair: Any, option: str) -> None:
    with pytest.raises(InvariantError) as caught:
        _options(fair=fair)
    assert caught.value.meta["option"] == option


def test_ujobs_strict_queues_names_queues_or_every_one() -> None:
    env = {"DATABASE_URL": PG, "UJOBS_QUEUES": "mail,bulk"}
    assert WorkerConfig.load(env).fair() == {}
    named = WorkerConfig.load({**env, "UJOBS_STRICT_QUEUES": "bulk,reports"})
    assert named.fair() == {"bulk": False}  # reports is another worker's queue
    assert WorkerConfig.load({**env, "UJOBS_STRICT_QUEUES": "*"}).fair() is False
    with pytest.raises(ConfigInvalidError) as caught:
        WorkerConfig.load({**env, "UJOBS_STRICT_QUEUES": "bulk,,"})
    assert "UJOBS_STRICT_QUEUES" in caught.value.message


@pytest.mark.parametrize(("fair", "first_four"), [(True, [0, 1, 2, 100]), (False, [0, 1, 2, 3])])
async def test_the_worker_claims_fair_or_strict_as_declared(
    fair: bool, first_four: list[int]
) -> None:
    driver, _ = frozen()
    gate = Gate()
    handle = declare(gate, tenanted=True)
    for n in range(20):
        await enqueue(driver, handle, n, org="flood")
    await enqueue(driver, handle, 100, org="quiet")
    worker = make_worker(driver, [handle], concurrency=4, fair=fair)
    await worker.run_once()
    rows = [await row(driver, j) for j in await running_ids(driver)]
    assert sorted(r.input["n"] for r in rows) == first_four
    gate.open.set()
    await worker.join()


async def running_ids(driver: MemoryDriver) -> list[str]:
    return [r.id for r in driver.state.rows.values() if r.state == "running"]
