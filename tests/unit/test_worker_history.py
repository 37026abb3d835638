"""What a worker keeps of its settled runs for its awaitable hooks (``ujobs.loop_probes``): a
bounded number of executions, each without the locals its error's frames held, so a run of
failures over big payloads does not keep them all alive."""

from __future__ import annotations

import gc
import weakref
from typing import Any

from tests.support.worker import declare, enqueue, make_worker, settled
from ujobs.drivers.memory.driver import memory_driver
from ujobs.execution.outcome import release_frames
from ujobs.execution.run import Run
from ujobs.loop_probes import Signals
from ujobs.worker.job_worker import SETTLED_HISTORY


class Ballast:
    """What a body held when it raised (a payload, a buffer); weakly referable."""


def test_a_capped_event_keeps_its_own_last_payloads_apart_from_the_others() -> None:
    signals = Signals(history=3, caps={"settled": 2})
    for n in range(5):
        signals.emit("settled", n)
        signals.emit("pass", n)
    assert signals.emitted("settled") == [3, 4]
    assert signals.emitted("pass") == [2, 3, 4]
    since = signals.mark()
    signals.emit("settled", 5)
    assert signals.emitted("settled", since) == [5]


def _raise_holding(ballast: Ballast) -> None:
    held = ballast  # a local of the raising frame
    raise ValueError(f"held {type(held).__name__}")


def test_release_frames_lets_go_of_the_locals_of_an_error_and_its_cause() -> None:
    ballast, cause_ballast = Ballast(), Ballast()
    alive = [weakref.ref(ballast), weakref.ref(cause_ballast)]
    try:
        try:
            _raise_holding(cause_ballast)
        except ValueError as cause:
            raise RuntimeError("wrapped") from cause
    except RuntimeError as exc:
        error: BaseException = exc
    try:
        _raise_holding(ballast)
    except ValueError as exc:
        error.__context__ = exc  # both chains: __cause__ first, as Python prints them
    del ballast, cause_ballast
    gc.collect()
    assert all(ref() is not None for ref in alive)  # the traceback's frames hold them
    release_frames(error)
    gc.collect()
    assert [ref() for ref in alive] == [None, None]
    assert "_raise_holding" in "".join(__import__("traceback").format_exception(error))


def test_release_frames_leaves_a_frame_that_still_runs() -> None:
    try:
        raise KeyError("here")  # this very frame is in the traceback and still executing
    except KeyError as exc:
        release_frames(exc)  # no RuntimeError
        release_frames(None)


async def test_a_worker_keeps_its_last_settled_runs_without_their_errors_locals() -> None:
    alive: list[weakref.ref[Ballast]] = []

    async def body(run: Run[Any]) -> None:
        ballast = Ballast()
        alive.append(weakref.ref(ballast))
        raise RuntimeError(f"failed holding {type(ballast).__name__}")

    driver = memory_driver()
    handle = declare(body, retry=__import__("ujobs").Retry(attempts=1))
    worker = make_worker(driver, [handle], concurrency=4)
    runs = SETTLED_HISTORY + 20
    for n in range(runs):
        await enqueue(driver, handle, n)
    await worker.start()
    try:
        await settled(worker, 1, since=0)
        await worker.signals.wait(
            "settled", lambda _: worker.runner.counters.settled >= runs, timeout_s=30
        )
    finally:
        await worker.stop()
    kept = worker.signals.emitted("settled")
    assert len(kept) == SETTLED_HISTORY
    assert all(isinstance(e.error, Exception) for e in kept)  # the error itself stays
    gc.collect()
    assert [ref for ref in alive if ref() is not None] == []
