"""§ Retries: the schedule, equal jitter, the final attempt, a stated Retry-After, and how the
error's retry classification decides between them."""

from __future__ import annotations

import math
import random
import uuid
from datetime import timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ujobs.errors import InvariantError, RateLimitedError, UltimateError, register_error_retry
from ujobs.jobs.retry import (
    STATED_SPREAD_CAP_MS,
    STATED_SPREAD_RATIO,
    Retry,
    backoff_delay_ms,
    base_delay_ms,
    coerce_retry,
    is_final_attempt,
    retry_after_seconds_of,
    retry_delay_ms,
    retry_schedule,
    stated_delay_ms,
    stop_reason,
)

policies = st.builds(
    lambda attempts, backoff, delay, extra, jitter: Retry(
        attempts=attempts, backoff=backoff, delay=delay, max_delay=delay + extra, jitter=jitter
    ),
    attempts=st.integers(1, 40),
    backoff=st.sampled_from(["exponential", "linear", "fixed"]),
    delay=st.integers(0, 600_000),
    extra=st.integers(0, 3_600_000),
    jitter=st.booleans(),
)


def test_the_spec_example() -> None:
    policy = Retry(attempts=5, backoff="exponential", delay=1000)
    assert retry_schedule(policy) == [1000, 2000, 4000, 8000]


def test_linear_and_fixed() -> None:
    assert retry_schedule(Retry(attempts=4, backoff="linear", delay="2s")) == [2000, 4000, 6000]
    assert retry_schedule(Retry(attempts=4, backoff="fixed", delay=timedelta(seconds=3))) == [
        3000,
        3000,
        3000,
    ]


def test_max_delay_clamps_every_backoff() -> None:
    assert retry_schedule(Retry(attempts=6, delay=1000, max_delay=5000)) == [
        1000,
        2000,
        4000,
        5000,
        5000,
    ]
    assert retry_schedule(Retry(attempts=4, backoff="linear", delay=3000, max_delay="5s")) == [
        3000,
        5000,
        5000,
    ]


def test_one_attempt_never_retries() -> None:
    assert retry_schedule(Retry(attempts=1)) == []


@given(policies)
def test_schedule_shape(policy: Retry) -> None:
    schedule = retry_schedule(policy)
    assert len(schedule) == policy.attempts - 1
    assert all(0 <= wait <= policy.max_delay_ms for wait in schedule)
    assert schedule == sorted(schedule)  # never shorter than the wait before it
    for n, wait in enumerate(schedule, start=1):
        raw = {
            "exponential": policy.delay_ms * 2 ** (n - 1),
            "linear": policy.delay_ms * n,
            "fixed": policy.delay_ms,
        }[policy.backoff]
        assert wait == min(raw, policy.max_delay_ms)


@given(policies, st.integers(1, 200), st.integers(0, 2**32))
def test_equal_jitter_keeps_half_and_spreads_the_rest(
    policy: Retry, attempt: int, seed: int
) -> None:
    base = base_delay_ms(policy, attempt)
    wait = backoff_delay_ms(policy, attempt, random.Random(seed))
    if policy.jitter:
        assert math.ceil(base / 2) <= wait <= base
    else:
        assert wait == base


def test_jitter_is_on_by_default_and_actually_spreads() -> None:
    policy = Retry(attempts=5, delay=1000)
    assert policy.jitter is True
    waits = {backoff_delay_ms(policy, 3, random.Random(seed)) for seed in range(50)}
    assert len(waits) > 10
    assert min(waits) >= 2000
    assert max(waits) <= 4000


@given(st.integers(1, 50), st.integers(-5, 60))
def test_is_final_attempt(attempts: int, attempt: int) -> None:
    assert is_final_attempt(Retry(attempts=attempts), attempt) is (attempt >= attempts)


def test_the_first_attempt_of_a_one_attempt_job_is_final() -> None:
    assert is_final_attempt(Retry(attempts=1), 1)
    assert not is_final_attempt(Retry(attempts=2), 1)


@given(
    policies,
    st.floats(min_value=0, max_value=10_000_000, allow_nan=False),
    st.integers(0, 2**32),
)
def test_a_stated_retry_after_is_clamped_then_spread_never_below_the_stated_time(
    policy: Retry, seconds: float, seed: int
) -> None:
    floor = min(math.ceil(seconds * 1000), policy.max_delay_ms)
    wait = stated_delay_ms(policy, seconds, random.Random(seed))
    if policy.jitter:
        assert floor <= wait <= floor + min(int(floor * STATED_SPREAD_RATIO), STATED_SPREAD_CAP_MS)
    else:
        assert wait == floor


def test_a_stated_time_over_max_delay_is_clamped_to_it() -> None:
    policy = Retry(max_delay="60s", jitter=False)
    assert stated_delay_ms(policy, 86_400) == 60_000
    jittered = Retry(max_delay="60s")
    assert 60_000 <= stated_delay_ms(jittered, 86_400) <= 65_000


def test_a_fractional_stated_time_never_rounds_down() -> None:
    assert stated_delay_ms(Retry(jitter=False), 1.0001) == 1001


@pytest.mark.parametrize("seconds", [-1, math.nan, math.inf])
def test_a_nonsense_stated_time_is_refused(seconds: float) -> None:
    with pytest.raises(InvariantError):
        stated_delay_ms(Retry(), seconds)


@pytest.mark.parametrize(
    ("meta", "expected"),
    [
        ({"retryAfterSeconds": 30}, 30.0),
        ({"retryAfterSeconds": 1.5}, 1.5),
        ({"retryAfterSeconds": 0}, None),
        ({"retryAfterSeconds": -3}, None),
        ({"retryAfterSeconds": math.nan}, None),
        ({"retryAfterSeconds": math.inf}, None),
        ({"retryAfterSeconds": True}, None),
        ({"retryAfterSeconds": "30"}, None),
        ({}, None),
    ],
)
def test_retry_after_seconds_is_read_off_the_error_meta(
    meta: dict[str, Any], expected: float | None
) -> None:
    assert retry_after_seconds_of(RateLimitedError("slow down", meta=meta)) == expected
    assert retry_after_seconds_of(ValueError("not ours")) is None


def _code(retry_class: Any) -> str:
    code = f"X_TEST_{uuid.uuid4().hex.upper()}"
    if retry_class is not None:
        register_error_retry({code: retry_class})
    return code


def test_a_retry_after_error_waits_the_stated_time_instead_of_the_backoff() -> None:
    policy = Retry(attempts=5, delay=1000, max_delay="10m", jitter=False)
    error = UltimateError("busy", code=_code("retry-after"), meta={"retryAfterSeconds": 90})
    assert retry_delay_ms(policy, 1, error) == 90_000
    assert retry_delay_ms(policy, 1, RateLimitedError("x", meta={"retryAfterSeconds": 7})) == 7000


def test_a_retry_after_error_that_names_no_time_keeps_the_backoff() -> None:
    policy = Retry(attempts=5, delay=1000, jitter=False)
    assert retry_delay_ms(policy, 3, RateLimitedError("x")) == 4000


@pytest.mark.parametrize("retry_class", ["retryable", None])
def test_retryable_and_unclassified_codes_keep_the_backoff_even_with_a_stated_time(
    retry_class: Any,
) -> None:
    policy = Retry(attempts=5, delay=1000, jitter=False)
    error = UltimateError("x", code=_code(retry_class), meta={"retryAfterSeconds": 90})
    assert retry_delay_ms(policy, 2, error) == 2000
    assert retry_delay_ms(policy, 2, ValueError("not ours")) == 2000


def test_a_terminal_code_stops_on_the_attempt_it_happened() -> None:
    policy = Retry(attempts=5)
    assert stop_reason(policy, 1, UltimateError("no", code=_code("terminal"))) == "terminal"


@pytest.mark.parametrize("retry_class", ["retryable", "retry-after", None])
def test_every_other_error_stops_only_when_attempts_run_out(retry_class: Any) -> None:
    policy = Retry(attempts=3)
    for error in (UltimateError("x", code=_code(retry_class)), RuntimeError("not ours")):
        assert stop_reason(policy, 1, error) is None
        assert stop_reason(policy, 2, error) is None
        assert stop_reason(policy, 3, error) == "attempts-exhausted"


@pytest.mark.parametrize(
    "fields",
    [
        {"attempts": 0},
        {"attempts": -1},
        {"attempts": 2.5},
        {"attempts": True},
        {"backoff": "quadratic"},
        {"delay": -1},
        {"delay": "3 days"},
        {"delay": math.nan},
        {"delay": 5000, "max_delay": 1000},
        {"jitter": "yes"},
        {"dead_letter": 0},
    ],
)
def test_a_policy_that_means_something_else_is_refused(fields: dict[str, Any]) -> None:
    with pytest.raises(InvariantError):
        Retry(**fields)


def test_coerce_retry_takes_a_policy_a_dict_or_none() -> None:
    assert coerce_retry(None) == Retry()
    assert coerce_retry({"attempts": 5, "delay": "2s"}) == Retry(attempts=5, delay="2s")
    policy = Retry(attempts=2)
    assert coerce_retry(policy) is policy
    with pytest.raises(InvariantError, match="maxDelay"):
        coerce_retry({"maxDelay": 10})
    with pytest.raises(InvariantError):
        coerce_retry(5)  # type: ignore[arg-type]


def test_describe_is_the_manifest_shape() -> None:
    assert Retry(attempts=5, delay="1s", max_delay="1m", dead_letter=False).describe() == {
        "attempts": 5,
        "backoff": "exponential",
        "delayMs": 1000,
        "maxDelayMs": 60_000,
        "jitter": True,
        "deadLetter": False,
    }
