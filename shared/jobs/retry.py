"""Retry policy: the backoff schedule, equal jitter, the final attempt, a stated Retry-After.

The schedule is deterministic (``retry_schedule``) so it can be printed and tested; jitter is
applied per delay (``backoff_delay``) so a burst of failures does not retry in lockstep.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.durations import Duration, duration_ms
from ujobs.errors import InvariantError, UltimateError, retry_class_of

Backoff = Literal["exponential", "linear", "fixed"]
StopReason = Literal["terminal", "attempts-exhausted"]

DEFAULT_ATTEMPTS = 3
DEFAULT_DELAY_MS = 1_000
DEFAULT_MAX_DELAY_MS = 3_600_000
# A stated delay is spread by at most this share of itself (and at most STATED_SPREAD_CAP_MS).
STATED_SPREAD_RATIO = 0.1
STATED_SPREAD_CAP_MS = 5_000


@dataclass(frozen=True, slots=True)
class Retry:
    """``{attempts, backoff, delay, max_delay, jitter, dead_letter}`` as the spec declares it.

    ``attempts`` counts every attempt, the first included: ``attempts=1`` never retries.
    ``dead_letter=False`` settles an exhausted job ``failed`` (``dropped``) instead of ``dead``.
    """

    attempts: int = DEFAULT_ATTEMPTS
    backoff: Backoff = "exponential"
    delay: Duration = DEFAULT_DELAY_MS
    max_delay: Duration = DEFAULT_MAX_DELAY_MS
    jitter: bool = True
    dead_letter: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise InvariantError("retry.attempts must be a whole number of at least 1")
        if self.attempts < 1:
            raise InvariantError("retry.attempts must be at least 1 (the first attempt counts)")
        for flag in ("jitter", "dead_letter"):
            if not isinstance(getattr(self, flag), bool):
                raise InvariantError(f"retry.{flag} must be True or False")
        if self.backoff not in ("exponential", "linear", "fixed"):
            raise InvariantError(
                f"retry.backoff must be exponential, linear or fixed; got {self.backoff!r}"
            )
        delay = duration_ms(self.delay, field="retry.delay")
        max_delay = duration_ms(self.max_delay, field="retry.max_delay")
        if max_delay < delay:
            raise InvariantError("retry.max_delay must not be below retry.delay")

    @property
    def delay_ms(self) -> int:
        return duration_ms(self.delay, field="retry.delay")

    @property
    def max_delay_ms(self) -> int:
        return duration_ms(self.max_delay, field="retry.max_delay")

    def describe(self) -> dict[str, Any]:
        return {
            "attempts": self.attempts,
            "backoff": self.backoff,
            "delayMs": self.delay_ms,
            "maxDelayMs": self.max_delay_ms,
            "jitter": self.jitter,
            "deadLetter": self.dead_letter,
        }


def coerce_retry(value: Retry | Mapping[str, Any] | None) -> Retry:
    """A ``Retry`` from a ``Retry``, a dict of its fields, or None (the default policy)."""
    if value is None:
        return Retry()
    if isinstance(value, Retry):
        return value
    if isinstance(value, Mapping):
        known = {"attempts", "backoff", "delay", "max_delay", "jitter", "dead_letter"}
        unknown = set(value) - known
        if unknown:
            raise InvariantError(f"unknown retry field(s): {', '.join(sorted(unknown))}")
        return Retry(**value)
    raise InvariantError("retry must be a Retry or a dict of its fields")


def base_delay_ms(policy: Retry, failed_attempt: int) -> int:
    """The un-jittered wait after attempt ``failed_attempt`` (1-based) fails."""
    n = max(1, failed_attempt)
    d = policy.delay_ms
    if policy.backoff == "fixed":
        raw = float(d)
    elif policy.backoff == "linear":
        raw = float(d) * n
    else:
        # 2 ** n overflows float long before it matters; clamp the exponent.
        raw = float(d) * math.pow(2, min(n - 1, 62))
    return int(min(raw, policy.max_delay_ms))


def retry_schedule(policy: Retry) -> list[int]:
    """The waits between attempts, without jitter: ``attempts - 1`` entries.

    ``retry_schedule(Retry(attempts=5, backoff="exponential", delay=1000))`` is
    ``[1000, 2000, 4000, 8000]``.
    """
    return [base_delay_ms(policy, n) for n in range(1, policy.attempts)]


def backoff_delay_ms(policy: Retry, failed_attempt: int, rng: random.Random | None = None) -> int:
    """The wait to apply: the schedule's entry, with equal jitter unless ``jitter=False``.

    Equal jitter keeps half the delay and randomises the other half, so the wait is never
    shorter than half the schedule and a burst spreads over the rest.
    """
    base = base_delay_ms(policy, failed_attempt)
    if not policy.jitter:
        return base
    r = rng or random
    # Whole milliseconds: the kept half rounds up, so the wait is in [ceil(base/2), base].
    spread = base // 2
    return base - spread + r.randint(0, spread)


def is_final_attempt(policy: Retry, attempt: int) -> bool:
    """True when a failure of ``attempt`` is not retried for want of attempts."""
    return attempt >= policy.attempts


def retry_after_seconds_of(error: BaseException) -> float | None:
    """The delay a responder named (``meta.retryAfterSeconds``); None when unstated.

    ``0``, a negative or a non-finite number is unstated, as a past HTTP-date is.
    """
    if not isinstance(error, UltimateError):
        return None
    raw = error.meta.get("retryAfterSeconds", error.meta.get("retry_after_seconds"))
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    if not math.isfinite(raw) or raw <= 0:
        return None
    return float(raw)


def stated_delay_ms(
    policy: Retry, retry_after_seconds: float, rng: random.Random | None = None
) -> int:
    """A stated Retry-After, clamped by ``max_delay``, plus a spread unless ``jitter=False``.

    The spread only ever adds, so a retry never lands before the time the responder named.
    """
    if not math.isfinite(retry_after_seconds) or retry_after_seconds < 0:
        raise InvariantError(
            f"a stated retry-after must be a finite number of seconds, got {retry_after_seconds!r}"
        )
    # Rounded up: a retry never lands before the millisecond the responder named.
    stated = min(math.ceil(retry_after_seconds * 1000), policy.max_delay_ms)
    if not policy.jitter:
        return stated
    r = rng or random
    spread = min(int(stated * STATED_SPREAD_RATIO), STATED_SPREAD_CAP_MS)
    return stated + r.randint(0, spread)


def stop_reason(policy: Retry, attempt: int, error: BaseException) -> StopReason | None:
    """Why a failure of ``attempt`` is not retried, or None when it is.

    A ``terminal`` code stops on the attempt it happened, attempts unspent; every other error —
    ``retryable``, ``retry-after``, unclassified, not ours — stops only when attempts run out.
    """
    if retry_class_of(error) == "terminal":
        return "terminal"
    if is_final_attempt(policy, attempt):
        return "attempts-exhausted"
    return None


def retry_delay_ms(
    policy: Retry, failed_attempt: int, error: BaseException, rng: random.Random | None = None
) -> int:
    """The wait before the next attempt after ``error``: the time a ``retry-after`` responder
    named (clamped, spread), else the backoff schedule with its jitter."""
    if retry_class_of(error) == "retry-after":
        stated = retry_after_seconds_of(error)
        if stated is not None:
            return stated_delay_ms(policy, stated, rng)
    return backoff_delay_ms(policy, failed_attempt, rng)
