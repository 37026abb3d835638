"""``Slots``: the free count ``room()`` answers is kept by ``take``/``give``; it must always be
what summing the pools would answer, whatever order runs take and give slots in."""

from __future__ import annotations

import random

import pytest

from ujobs.worker.slots import Slots


def summed_room(slots: Slots, pools: dict[str, int], cap: int | None) -> int:
    free = sum(max(0, size - slots.held(queue)) for queue, size in pools.items())
    return free if cap is None else max(0, min(free, cap - slots.in_flight))


@pytest.mark.parametrize("seed", range(20))
@pytest.mark.parametrize("cap", [None, 3, 50])
def test_room_is_the_pools_free_slots_summed_under_any_takes_and_gives(
    seed: int, cap: int | None
) -> None:
    rng = random.Random(seed)
    pools = {"a": rng.randint(0, 4), "b": rng.randint(1, 6), "c": 2}
    slots = Slots(pools, cap)
    queues = [*pools, "unknown"]  # a row of a queue this worker has no pool for
    for _ in range(300):
        queue = rng.choice(queues)
        # takes may run a pool past its size (a row claimed ahead started after a drain)
        if rng.random() < 0.55:
            slots.take(queue)
        else:
            slots.give(queue)
        assert slots.room() == summed_room(slots, pools, cap)
        assert slots.free(queue) == pools.get(queue, 0) - slots.held(queue)
        assert slots.held(queue) >= 0
        assert slots.in_flight >= 0


def test_a_pool_held_past_its_size_frees_nothing_until_it_is_back_under() -> None:
    slots = Slots({"a": 1, "b": 1}, None)
    slots.take("a")
    slots.take("a")
    assert slots.room() == 1  # b's slot only
    slots.give("a")
    assert slots.room() == 1  # a is at its size again, still full
    slots.give("a")
    assert slots.room() == 2
