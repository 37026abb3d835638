"""A body's return value is stored with its run: as JSON, within the limit, refused (terminal,
never truncated, never logged) past it."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from tests.support.execute import attempt, enqueue, frozen_driver, last_error, row
from ujobs.errors import ConfigInvalidError
from ujobs.execution.run import Run
from ujobs.jobs.job import job
from ujobs.jobs.retry import Retry
from ujobs.jobs.schema import t
from ujobs.results import (
    DEFAULT_RESULT_MAX_BYTES,
    RESULT_MAX_BYTES_ENV,
    encode_result,
    result_max_bytes,
    set_result_max_bytes,
)

SECRET = "s3cr3t-result-value"


@pytest.fixture(autouse=True)
def _limit_reset() -> Iterator[None]:
    yield
    set_result_max_bytes(None)


def _declare(body: Any) -> Any:
    return job(
        idempotency_key="k", tenant="none", name=f"r.{body.__name__}", retry=Retry(attempts=3)
    )(body)


@dataclass
class Report:
    rows: int
    label: str


async def test_the_return_value_is_stored_with_the_done_row() -> None:
    driver, _ = frozen_driver()

    async def returns(run: Run[Any]) -> Report:
        return Report(rows=2, label="ok")

    handle = _declare(returns)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert execution.outcome == "completed"
    stored = await row(driver, job_id)
    assert (stored.state, stored.result) == ("done", {"rows": 2, "label": "ok"})


async def test_a_body_returning_nothing_stores_no_result() -> None:
    driver, _ = frozen_driver()

    async def quiet(run: Run[Any]) -> None:
        return None

    handle = _declare(quiet)
    job_id = await enqueue(driver, handle)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert (await row(driver, job_id)).result is None


async def test_a_result_over_the_limit_is_refused_terminal_and_never_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    set_result_max_bytes(64)
    driver, _ = frozen_driver()

    async def huge(run: Run[Any]) -> dict[str, str]:
        return {"blob": SECRET * 10}

    handle = _declare(huge)
    job_id = await enqueue(driver, handle)
    with caplog.at_level(logging.DEBUG):
        execution = await attempt(driver, handle)
    assert (execution.outcome, execution.stop_reason) == ("dead-lettered", "terminal")
    assert execution.code == "X_RESULT_TOO_LARGE"
    assert execution.attempt == 1, "terminal: no second attempt"
    stored = await row(driver, job_id)
    assert (stored.state, stored.result) == ("dead", None)
    error = await last_error(driver, job_id)
    assert error.startswith("X_RESULT_TOO_LARGE: ")
    assert "at most 64" in error
    assert SECRET not in error
    assert all(SECRET not in r.getMessage() and SECRET not in caplog.text for r in caplog.records)


async def test_a_result_json_cannot_carry_is_refused_terminal() -> None:
    driver, _ = frozen_driver()

    async def odd(run: Run[Any]) -> object:
        return object()

    handle = _declare(odd)
    job_id = await enqueue(driver, handle)
    execution = await attempt(driver, handle)
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_RESULT_INVALID")
    assert (await row(driver, job_id)).state == "dead"


def test_the_limit_counts_encoded_bytes_exactly() -> None:
    text = encode_result("j", "é" * 10, max_bytes=22)  # 20 bytes of é and two quotes
    assert text == '"' + "é" * 10 + '"'
    with pytest.raises(Exception, match="X_RESULT_TOO_LARGE") as refused:
        encode_result("j", "é" * 10, max_bytes=21)
    assert getattr(refused.value, "meta", {}) == {"job": "j", "bytes": 22, "maxBytes": 21}


def test_the_limit_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(RESULT_MAX_BYTES_ENV, raising=False)
    assert result_max_bytes() == DEFAULT_RESULT_MAX_BYTES == 262_144
    monkeypatch.setenv(RESULT_MAX_BYTES_ENV, "1000")
    assert result_max_bytes() == 1000
    monkeypatch.setenv(RESULT_MAX_BYTES_ENV, "lots")
    with pytest.raises(ConfigInvalidError):
        result_max_bytes()
    with pytest.raises(ConfigInvalidError):
        set_result_max_bytes(0)


async def test_a_declared_output_checks_the_result_and_gives_its_stored_form() -> None:
    driver, _ = frozen_driver()
    output = t.object(total=t.number.int(), note=t.optional(t.string))

    async def typed(run: Run[Any]) -> Any:
        return output.model(total=3)

    async def mistyped(run: Run[Any]) -> dict[str, str]:
        return {"total": "three"}

    good = job(idempotency_key="k", tenant="none", name="r.typed", output=output)(typed)
    bad = job(idempotency_key="k", tenant="none", name="r.mistyped", output=output)(mistyped)
    assert good.describe()["output"]["required"] == ["total"]
    job_id = await enqueue(driver, good)
    assert (await attempt(driver, good)).outcome == "completed"
    assert (await row(driver, job_id)).result == {"total": 3, "note": None}
    bad_id = await enqueue(driver, bad)
    execution = await attempt(driver, bad)
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_RESULT_INVALID")
    assert "not its declared output" in await last_error(driver, bad_id)
