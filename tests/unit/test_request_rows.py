"""A handle's batch (``RequestRows``): to a driver that iterates it, exactly the requests
``JobHandle.request`` builds; to the Postgres COPY (``copy_rows``), the same lines
``ujobs.drivers.postgres.copy`` writes for those requests; to the announcing wrapper, its queue
announced only for a due row it inserted. The stored input (``InputSchema.dump``) is the one
JSON text whatever the path."""

from __future__ import annotations

import math
from typing import Any

import orjson
import pytest

from ujobs import Run, job, t
from ujobs.clock import SYSTEM_CLOCK, FrozenClock
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.memory.driver import memory_driver
from ujobs.drivers.postgres.copy import ABORT_LINE, copy_chunks
from ujobs.drivers.postgres.copy_rows import RowsCopy
from ujobs.drivers.request_rows import Checked, RequestRows
from ujobs.errors import InputInvalidError
from ujobs.jobs.declaration_rules import KeyedConcurrency
from ujobs.jobs.enqueue_target import set_job_driver
from ujobs.jobs.schema import InputSchema
from ujobs.wake.announce import announcing
from ujobs.wake.local import on_enqueued

AWKWARD = "tab\there, line\nbreak, cr\rreturn, back\\slash, \\N, \\., é ☃ 𝄞"
NOW = 1_700_000_000_000

VALUES: list[Any] = [
    {"text": "plain", "extra": None},
    {"text": AWKWARD, "extra": {"nested": [[[{"deep": [AWKWARD, "\\u0000"]}]]]}},
    {"text": "ünïcödé", "extra": [2**63 - 1, -(2**63), 2**64 - 1, 2**53 + 1, 1e300, -0.0]},
    {"text": "", "extra": {"é": {"☃": [0.1, 2.5, True, False, {}]}}},
]


def _handle() -> Any:
    @job(
        name="rows-unit",
        input=t.object(text=t.string, extra=t.any),
        idempotency_key=lambda i: f"key {i.text}",
        tenant=lambda i: f"org {len(i.text) % 2} {AWKWARD}",
        concurrency=KeyedConcurrency(key=lambda i: f"acct {i.text}"),
        queue="rows",
        priority=4,
    )
    async def rows(run: Run[Any]) -> None:
        """A no-op."""

    return rows


def test_iterated_a_batch_is_the_requests_the_handle_builds() -> None:
    handle = _handle()
    batch = handle._batch(iter(VALUES), None, None, None, 6)
    assert list(batch) == [handle.request(v, priority=6) for v in VALUES]
    assert list(batch) == []  # one pass, as the generator it stands for


def test_a_batch_reads_its_shared_fields_after_the_first_input() -> None:
    handle = _handle()
    with pytest.raises(InputInvalidError):  # the input, as a single enqueue checks it first
        list(handle._batch(iter([{"text": 1}]), None, None, None, 99))
    assert list(handle._batch(iter([]), None, None, None, 99)) == []


def test_a_delayed_batch_stamps_each_row_its_own_due_time() -> None:
    handle = _handle()
    batch = handle._batch(iter(VALUES), 60_000, None, None, None)
    requests = list(batch)
    assert batch.run_ats == [r.run_at_ms for r in requests]
    assert all(r.run_at_ms is not None for r in requests)


def _lines(text: list[bytes]) -> list[str]:
    return b"".join(text).decode().splitlines(keepends=True)


@pytest.mark.parametrize("at", [None, NOW, NOW + 1, NOW - 5, NOW + 61_001])
def test_copy_rows_writes_the_lines_copy_writes_for_the_requests(at: int | None) -> None:
    handle = _handle()
    shared = handle.request(VALUES[0])

    def share() -> EnqueueRequest:
        return EnqueueRequest(
            f"send {AWKWARD}",
            None,
            "",
            f"q {AWKWARD}",
            None,
            shared.max_attempts,
            at,
            None,
            None,
            f"00-{AWKWARD}",
            f"user {AWKWARD}",
            None,
            None,
            shared.priority,
            None,
        )

    def check(value: Any) -> Checked:
        checked: Checked = handle._checked_input(value)
        return checked

    values = [*VALUES, VALUES[1]]  # a repeat: no line, the earlier row's answer
    rows = RowsCopy(RequestRows(iter(values), check, share, None))
    first = rows.chunk(2)
    assert first is not None
    ours = _lines(list(rows.text(first, 2, NOW, NOW + 1_000)))
    assert [a.deduped for a in rows.answers] == [False, False, False, False, True]
    assert rows.answers[4] == rows.answers[1].__class__(
        rows.answers[1].id, rows.answers[1].run_id, True
    )
    assert rows.due is (at is None or at <= NOW + 1_000)
    again = RequestRows(iter(values), check, share, None)
    requests = list(again)[:4]
    new = [(request, a.id, a.run_id) for request, a in zip(requests, rows.answers[:4], strict=True)]
    theirs = _lines(list(copy_chunks([new[:2], new[2:]], NOW)))
    assert ours == theirs
    assert len(ours) == 4


def test_copy_rows_ends_with_the_abort_line_when_a_row_raises() -> None:
    handle = _handle()
    values = [*VALUES, {"text": None}]
    batch = handle._batch(iter(values), None, None, None, None)
    rows = RowsCopy(batch)
    first = rows.chunk(2)
    assert first is not None
    text = list(rows.text(first, 2, NOW, NOW))
    assert text[-1] == ABORT_LINE
    assert isinstance(rows.error, InputInvalidError)


async def test_the_announcing_wrapper_announces_a_batch_once_for_a_due_new_row() -> None:
    clock = FrozenClock(SYSTEM_CLOCK.now_ms())  # a handle's delay reads the system clock
    handle = _handle()
    set_job_driver(announcing(memory_driver(clock=clock)))
    heard: list[str] = []
    off = on_enqueued(heard.append)
    try:
        answers = await handle.enqueue_many(iter(VALUES))
        assert not any(a.deduped for a in answers)
        assert heard == ["rows"]
        again = await handle.enqueue_many(iter(VALUES))
        assert all(a.deduped for a in again)
        assert heard == ["rows"]  # nothing inserted: nothing announced
        await handle.enqueue_many(iter([{"text": "later", "extra": 1}]), delay=5_000)
        assert heard == ["rows"]  # not due soon
        await handle.enqueue_many(iter([{"text": "soon", "extra": 1}]), delay=500)
        assert heard == ["rows", "rows"]
        assert await handle.enqueue_many(iter([])) == []
    finally:
        off()
        set_job_driver(None)


ODD: list[Any] = [
    float("nan"),
    float("inf"),
    {1: "int key", False: "bool key", None: "none key", 1.5: "float key"},
    (1, (2, 3)),
    2**64 - 1,
    -(2**63),
    5e-324,
    1.7976931348623157e308,
    "\\u0000 is only text",
    "é ☃ 𝄞 \u2028",
    [[[[[[[[[[[[[[[[[[["deep"]]]]]]]]]]]]]]]]]]],
]


@pytest.mark.parametrize("extra", ODD, ids=repr)
def test_the_stored_input_is_what_its_json_text_reads_back(extra: Any) -> None:
    """``dump`` answers the serializer's JSON-mode value without decoding its encoding again:
    it is equal to what its JSON text reads back, and that text is the same bytes again."""
    schema: InputSchema[Any] = InputSchema(t.object(extra=t.any))
    dumped = schema.dump(schema.parse({"extra": extra}))
    text = orjson.dumps(dumped)
    assert orjson.loads(text) == dumped
    assert orjson.dumps(orjson.loads(text)) == text
    if isinstance(extra, float) and not math.isfinite(extra):
        assert dumped == {"extra": None}


@pytest.mark.parametrize("extra", [2**64, "a\x00b", {"k": ["\x00"]}])
def test_an_unstorable_input_is_still_refused(extra: Any) -> None:
    schema: InputSchema[Any] = InputSchema(t.object(extra=t.any))
    with pytest.raises(InputInvalidError):
        schema.dump(schema.parse({"extra": extra}))
