"""``new_ids`` mints a batch exactly as that many ``new_id`` calls would: UUIDv7, strictly
increasing across batches and single ids, unique, even when one batch outruns a millisecond's
counter."""

from __future__ import annotations

import threading
import uuid

import pytest

from ujobs import ids
from ujobs.ids import new_id, new_ids


def test_a_batch_is_uuidv7_strictly_increasing_and_after_every_earlier_id() -> None:
    before = new_id()
    batch = new_ids(5_000)  # more than one millisecond's 4096 counter values
    after = new_id()
    minted = [before, *batch, after]
    assert minted == sorted(minted)
    assert len(set(minted)) == len(minted)
    for text in batch:
        parsed = uuid.UUID(text)
        assert str(parsed) == text
        assert parsed.version == 7
        assert parsed.variant == uuid.RFC_4122


def test_batches_and_single_ids_interleaved_from_threads_stay_unique() -> None:
    out: list[list[str]] = []

    def mint() -> None:
        mine: list[str] = []
        for _ in range(200):
            mine.extend(new_ids(7))
            mine.append(new_id())
        assert mine == sorted(mine)
        out.append(mine)

    threads = [threading.Thread(target=mint) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    everything = [i for mine in out for i in mine]
    assert len(set(everything)) == len(everything) == 4 * 200 * 8


def test_a_clock_step_back_keeps_the_order(monkeypatch: pytest.MonkeyPatch) -> None:
    first = new_ids(3)
    monkeypatch.setattr("ujobs.ids.time.time_ns", lambda: 1_000_000_000)  # 1970: far behind
    later = [*new_ids(4_100), new_id()]
    assert first[-1] < later[0]
    assert later == sorted(later)
    assert len(set(later)) == len(later)


@pytest.mark.parametrize("count", [0, -1])
def test_no_ids_for_a_count_below_one(count: int) -> None:
    assert new_ids(count) == []


def test_the_bulk_layout_formats_exactly_what_the_per_id_loop_does() -> None:
    entropy = bytes(range(256)) * 3 + b"\xff" * 50  # every byte value, in every column
    prefixes = [(1_700_000_000_000 + i // 7) << 16 | 0x7000 | (i * 37 % 4096) for i in range(99)]
    assert ids._format_bulk(prefixes, entropy) == ids._format_each(prefixes, entropy)
    assert len(new_ids(ids._BULK - 1)) == ids._BULK - 1  # the per-id loop path


@pytest.mark.parametrize("count", [1, 15, 16, 17, 64, 128, 1_000])
def test_the_bulk_layout_formats_the_ids_one_at_a_time_formatting_does(count: int) -> None:
    entropy = bytes(range(256)) * (8 * count // 256 + 1)  # every byte value, the variant's too
    entropy = entropy[: 8 * count] + b"\xff\xff"
    prefixes = [(0x0193_A1B2_C3D4 << 16) | 0x7000 | (i & 0xFFF) for i in range(count)]
    assert ids._format_bulk(prefixes, entropy) == ids._format_each(prefixes, entropy)
