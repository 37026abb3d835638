"""``task()``: cron and an IANA tz validated where declared, catch-up, a synchronous enqueue,
and the handle (``entries`` / ``enqueue`` / ``describe`` / the scheduler's ``requests_for``)."""

from __future__ import annotations

import gc
from typing import Any

import orjson
import pytest

from tests.unit.conftest import RecordingFacade
from ujobs import Run, job, t, task
from ujobs.clock import FrozenClock
from ujobs.errors import (
    DriverUnavailableError,
    InputInvalidError,
    JobDeclarationInvalidError,
    JobDuplicateError,
    TaskDeclarationInvalidError,
)
from ujobs.jobs.job import JobHandle
from ujobs.jobs.task import DEFAULT_MAX_CATCH_UP, TaskHandle


def make_job(name: str, **options: Any) -> JobHandle[Any]:
    """A job named after its function (so a test may declare the same one twice)."""

    async def body(run: Run[Any]) -> None: ...

    body.__name__ = name
    defaults: dict[str, Any] = {
        "input": t.object(occurrence_ms=t.number.int()),
        "idempotency_key": lambda i: f"{name}:{i.occurrence_ms}",
        "tenant": "none",
    }
    handle: JobHandle[Any] = job(**{**defaults, **options})(body)
    return handle


def declare(**overrides: Any) -> TaskHandle:
    digest = make_job("send_digest")
    options: dict[str, Any] = {
        "name": "nightly",
        "cron": "0 3 * * *",
        "tz": "UTC",
        "enqueue": lambda occ: [(digest, {"occurrence_ms": occ})],
    }
    options.update(overrides)
    handle: TaskHandle = task(**options)
    return handle


def refused(**overrides: Any) -> TaskDeclarationInvalidError:
    with pytest.raises(TaskDeclarationInvalidError) as info:
        declare(**overrides)
    assert info.value.code == "X_TASK_DECLARATION_INVALID"
    return info.value


# --- declaring ------------------------------------------------------------------------------


def test_the_decorator_names_the_task_after_its_function() -> None:
    digest = make_job("send_digest")

    @task(cron="0 3 * * *", tz="UTC")
    def nightly_digest(occurrence_ms: int) -> list[Any]:
        """Send last night's digest."""
        return [(digest, {"occurrence_ms": occurrence_ms})]

    assert nightly_digest.name == "nightly_digest"
    assert nightly_digest.describe()["description"] == "Send last night's digest."


def test_the_factory_needs_a_name() -> None:
    with pytest.raises(TaskDeclarationInvalidError, match="name="):
        # No name, on purpose.
        task(cron="0 3 * * *", tz="UTC", enqueue=lambda occ: [])  # type: ignore[call-overload]
    assert declare(name="nightly").name == "nightly"


def test_tz_is_required_by_the_signature() -> None:
    with pytest.raises(TypeError, match="tz"):
        task(cron="0 3 * * *", name="x", enqueue=lambda occ: [])  # type: ignore[call-overload]


@pytest.mark.parametrize("tz", ["UTC", "America/Bogota", "Europe/Berlin", "Asia/Kolkata"])
def test_an_iana_zone_is_accepted(tz: str) -> None:
    assert declare(tz=tz).describe()["tz"] == tz


@pytest.mark.parametrize(
    "tz", ["Bogota", "america/bogota", "", None, "UTC+5", "../etc/passwd", "/etc/localtime", 5]
)
def test_a_string_that_is_not_an_iana_zone_is_refused(tz: Any) -> None:
    error = refused(tz=tz)
    assert "IANA" in error.message


def test_the_refusal_says_what_to_write() -> None:
    assert "America/Bogota" in refused(tz="Bogota").message


@pytest.mark.parametrize(
    "cron", ["0 3 * * *", "*/5 * * * *", "0 9 * * MON-FRI", "* * * * * */20", "@daily", "@HOURLY"]
)
def test_five_fields_six_with_seconds_last_or_an_alias_are_accepted(cron: str) -> None:
    assert declare(cron=cron).describe()["cron"] == cron


@pytest.mark.parametrize(
    "cron",
    [
        "",
        "   ",
        None,
        "61 * * * *",
        "* * * *",
        "* * * * * * *",  # a seventh (year) field the scheduler does not resolve
        "0 0 31 2 *",  # never fires
        "H * * * *",
        "R 3 * * *",  # a random minute differs per scheduler replica
        "@reboot",
        "every day",
    ],
)
def test_a_cron_no_scheduler_can_honour_is_refused(cron: Any) -> None:
    assert "cron" in refused(cron=cron).message


@pytest.mark.parametrize("catch_up", ["skip", "run-once", "run-all"])
def test_the_three_catch_up_policies(catch_up: str) -> None:
    assert declare(catch_up=catch_up).describe()["catchUp"] == catch_up


def test_catch_up_defaults_to_skip_and_max_catch_up_to_10() -> None:
    described = declare().describe()
    assert described["catchUp"] == "skip"
    assert described["maxCatchUp"] == DEFAULT_MAX_CATCH_UP == 10


@pytest.mark.parametrize("catch_up", ["all", "run_once", None, ""])
def test_an_unknown_catch_up_is_refused(catch_up: Any) -> None:
    refused(catch_up=catch_up)


@pytest.mark.parametrize("max_catch_up", [0, -1, 1.5, True, "3", None])
def test_max_catch_up_must_be_a_whole_number_of_at_least_one(max_catch_up: Any) -> None:
    refused(max_catch_up=max_catch_up)
    assert declare(max_catch_up=3).describe()["maxCatchUp"] == 3


def test_an_async_enqueue_is_refused_where_declared_in_both_forms() -> None:
    async def fan_out(occurrence_ms: int) -> list[Any]:
        return []

    with pytest.raises(TaskDeclarationInvalidError, match="synchronous"):
        # Async, on purpose.
        task(name="x", cron="0 3 * * *", tz="UTC", enqueue=fan_out)  # type: ignore[arg-type]
    with pytest.raises(TaskDeclarationInvalidError, match="synchronous"):
        task(cron="0 3 * * *", tz="UTC")(fan_out)  # type: ignore[arg-type]  # async, on purpose


def test_a_function_that_hands_back_a_coroutine_is_refused_when_read() -> None:
    async def later() -> list[Any]:
        return []

    sneaky = declare(enqueue=lambda occ: later())
    with pytest.raises(TaskDeclarationInvalidError, match="synchronous"):
        sneaky.entries(0)
    gc.collect()  # the coroutine was closed: no "never awaited" warning (warnings are errors)


def test_two_tasks_setting_the_same_name_are_refused() -> None:
    first = declare(name="rollup")
    with pytest.raises(JobDuplicateError):
        declare(name="rollup")
    assert first.name == "rollup"


# --- the handle ---------------------------------------------------------------------------


def test_entries_are_the_declared_pairs_in_declaration_order() -> None:
    a, b = make_job("a_job"), make_job("b_job")
    fleet = declare(enqueue=lambda occ: [(b, {"occurrence_ms": occ}), [a, {"occurrence_ms": 1}]])
    assert fleet.entries(42) == [(b, {"occurrence_ms": 42}), (a, {"occurrence_ms": 1})]
    assert fleet.describe()["jobs"] == ["b_job", "a_job"]


@pytest.mark.parametrize(
    "produced",
    [
        lambda job_: [job_],
        lambda job_: [(job_, {}, "extra")],
        lambda job_: [("send_digest", {})],
        lambda job_: {"send_digest": {}},
        lambda job_: None,
        lambda job_: "send_digest",
    ],
)
def test_entries_that_are_not_job_input_pairs_are_refused(produced: Any) -> None:
    handle = make_job("send_digest")
    broken = declare(enqueue=lambda occ: produced(handle))
    with pytest.raises(TaskDeclarationInvalidError, match="pairs"):
        broken.entries(0)


def test_describe_is_the_manifest_row_and_is_json() -> None:
    described = declare(tz="America/Bogota", catch_up="run-all", max_catch_up=4).describe()
    assert described == {
        "kind": "task",
        "name": "nightly",
        "cron": "0 3 * * *",
        "tz": "America/Bogota",
        "catchUp": "run-all",
        "maxCatchUp": 4,
        "description": None,
        "jobs": ["send_digest"],
    }
    assert orjson.loads(orjson.dumps(described)) == described


async def test_enqueue_fires_every_entry_now_one_result_each(queued: RecordingFacade) -> None:
    a, b = make_job("a_job"), make_job("b_job")
    fleet = declare(enqueue=lambda occ: [(a, {"occurrence_ms": occ}), (b, {"occurrence_ms": occ})])
    results = await fleet.enqueue(clock=FrozenClock(1_700_000_000_000))
    assert [r.id for r in results] == ["job-1", "job-2"]
    assert [(r.name, r.idempotency_key) for r in queued.requests] == [
        ("a_job", "a_job:1700000000000"),  # each job's own key
        ("b_job", "b_job:1700000000000"),
    ]


async def test_enqueue_validates_every_entry_before_queuing_any(queued: RecordingFacade) -> None:
    a = make_job("a_job")
    fleet = declare(enqueue=lambda occ: [(a, {"occurrence_ms": occ}), (a, {"occurrence_ms": "x"})])
    with pytest.raises(InputInvalidError):
        await fleet.enqueue()
    assert queued.requests == []


async def test_enqueue_with_no_driver_is_x_driver_unavailable() -> None:
    with pytest.raises(DriverUnavailableError):
        await declare().enqueue()


def test_the_schedulers_fire_is_scoped_to_the_task_and_occurrence() -> None:
    nightly = declare()
    [fire] = nightly.requests_for(1_700_000_000_000)
    assert fire.name == "send_digest"
    assert fire.input == {"occurrence_ms": 1_700_000_000_000}
    assert fire.idempotency_key == "send_digest:1700000000000@nightly:1700000000000"
    assert nightly.requests_for(1_700_000_000_000) == [fire]  # two schedulers: one row
    assert nightly.requests_for(1_700_000_060_000)[0].idempotency_key != fire.idempotency_key


def test_the_schedulers_fire_checks_the_concurrency_key_too() -> None:
    keyed = make_job("keyed", concurrency={"key": lambda i: "", "limit": 1})
    nightly = declare(enqueue=lambda occ: [(keyed, {"occurrence_ms": occ})])
    with pytest.raises(JobDeclarationInvalidError, match=r"concurrency\.key"):
        nightly.requests_for(0)
