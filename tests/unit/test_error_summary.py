"""``error_summary``: ``last_error`` as a tenant reads it, the headline and verdict without any
part of the stack, whatever shape the stack has (chained, grouped, no traceback at all)."""

from __future__ import annotations

from ujobs.errors import InputInvalidError
from ujobs.execution.settle import error_summary, last_error_text


def _raised(make: type[BaseException] | None = None) -> BaseException:
    try:
        try:
            raise KeyError("card")
        except KeyError as inner:
            raise InputInvalidError("the card is gone") from inner
    except InputInvalidError as outer:
        if make is None:
            return outer
        try:
            raise ExceptionGroup("two failed", [outer, ValueError("and this")])
        except ExceptionGroup as group:
            return group


def test_a_chained_error_keeps_its_headline_and_verdict_only() -> None:
    text = last_error_text(_raised(), "stop: terminal")
    assert 'File "' in text
    assert error_summary(text) == "X_INPUT_INVALID: the card is gone\nstop: terminal"


def test_an_exception_group_and_a_bare_error_lose_every_frame() -> None:
    grouped = error_summary(last_error_text(_raised(ExceptionGroup)))
    assert grouped is not None
    assert 'File "' not in grouped
    assert grouped.startswith("ExceptionGroup: two failed")
    bare = error_summary(last_error_text(ValueError("never raised")))
    assert bare is not None
    assert 'File "' not in bare
    assert bare.startswith("ValueError: never raised")
    assert error_summary(None) is None
    assert error_summary("X_JOB_LEASE_LOST: the lease lapsed") == (
        "X_JOB_LEASE_LOST: the lease lapsed"
    )
