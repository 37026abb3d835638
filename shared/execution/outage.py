"""When the store is away for a moment (a Postgres restart, a Redis failover): a settle is sent
again while the lease lasts, and an attempt the outage failed is handed back uncounted.

What counts as "away" is decided once, by the drivers: a call that could not reach the store
leaves the driver as ``X_DRIVER_UNREACHABLE`` (``DriverUnreachableError``; the Postgres
driver's ``ujobs.drivers.postgres.unreachable``, the Redis driver's connection and timeout
errors). Nothing else qualifies — not a script error, not a constraint, not a user's body
failing on a connection of its own (a raw client error is the body's failure, counted like any
other).

* **A settle (ack or nack) failed with it**: it is sent again after 50 ms, doubling to 1 s
  (equal jitter), for as long as the lease lasts — the heartbeat's window, from the last
  renewal that landed on the worker's clock; outside a worker, the claim's own lease.
* **The attempt failed with it** (the body raised it, say from a step's ``load_steps`` or
  ``save_step``): the attempt is ``interrupted`` — handed back uncounted, due at once — at
  most ``MAX_UNREACHABLE_RETURNS`` times per row (the row's ``unreachable_returns``, which
  the nack itself fences on). Past that the ordinary verdict applies (retried or
  dead-lettered, counted), so a row whose own step brings the server down cannot loop
  uncounted for ever.

A settle that still fails when the lease ends is given up (``jobs.settle.failed``): the row
stays ``running`` until its lease lapses and the next claim takes it as a counted attempt,
which is what at-least-once already promised. A retried settle answered False may mean the
EARLIER try landed and only its answer was lost (the connection broke after the commit); the
refusal is logged with ``after_unreachable`` so the two cases can be told apart in the logs.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from ujobs.clock import Clock
from ujobs.drivers.base import ClaimedJob, NackOptions
from ujobs.errors import DriverUnreachableError, error_code_of

log = logging.getLogger("ujobs.jobs")

SETTLE_RETRY_FIRST_MS = 50
SETTLE_RETRY_MAX_MS = 1_000
"""A restart takes about a second; a settle tries again within a second of the store's return."""
MAX_UNREACHABLE_RETURNS = 3
"""How many times one row may be handed back uncounted for an outage; then attempts count."""

LeaseLeft = Callable[[], int]
"""Milliseconds of lease the worker still holds on the row (<= 0: none)."""
SettleAnswer = Literal["landed", "refused", "failed"]
_JITTER = random.Random()


@dataclass(frozen=True, slots=True)
class SettleResult:
    """How a settle ended: ``landed``, ``refused`` (not ours; or, for an outage hand-back, the
    row's tally at its cap) or ``failed`` (the driver raised, and no retry was left)."""

    answer: SettleAnswer
    tries: int


def unreachable_failure(error: BaseException) -> bool:
    """The call (or the attempt) failed only because the driver could not reach its store."""
    return error_code_of(error) == DriverUnreachableError.code


def outage_hand_back(now_ms: int) -> NackOptions:
    """The nack of an attempt the outage failed: uncounted, due now, fenced on the row's cap."""
    return NackOptions(count=False, run_at_ms=now_ms, unreachable_cap=MAX_UNREACHABLE_RETURNS)


def claim_lease_left(claimed: ClaimedJob, clock: Clock) -> LeaseLeft:
    """The claim's own lease, for a settle sent outside a worker (no renewal ever extended it:
    the store's expiry stamped at the claim, on the driver's clock)."""
    return lambda: claimed.lease_expires_at_ms - clock.now_ms()


def retry_delay_ms(tries: int, rng: random.Random | None = None) -> int:
    """Equal jitter over 50 ms doubling to 1 s, so a fleet coming back does not retry in step."""
    ceiling = min(SETTLE_RETRY_MAX_MS, SETTLE_RETRY_FIRST_MS << min(max(0, tries - 1), 16))
    half = ceiling // 2
    return half + (rng or _JITTER).randint(0, ceiling - half)


async def send_until_landed(
    send: Callable[[], Awaitable[bool]],
    *,
    lease_left: LeaseLeft,
    fields: Callable[[], dict[str, Any]],
    rng: random.Random | None = None,
    first_failure: Exception | None = None,
) -> SettleResult:
    """``send()`` until it answers, sent again on ``X_DRIVER_UNREACHABLE`` while the lease
    lasts. Logs once when it starts retrying and once when it ends (never per try: an outage
    under load would otherwise write a line per held row per try). ``first_failure``: the
    caller already sent once and that try raised it (the settle's first try is sent without
    this frame, so a settle that lands at once pays for none of it)."""
    tries = 0
    failure = first_failure
    while True:
        tries += 1
        if failure is None:
            try:
                landed = await send()
            except Exception as raised:
                failure = raised
            else:
                if tries > 1:
                    log.info("jobs.settle.recovered", extra={**fields(), "tries": tries})
                return SettleResult("landed" if landed else "refused", tries)
        error, failure = failure, None
        left = lease_left()
        if not unreachable_failure(error) or left <= 0:
            log.error(
                "jobs.settle.failed",
                exc_info=(type(error), error, error.__traceback__),
                extra={**fields(), "tries": tries, "lease_left_ms": max(0, left)},
            )
            return SettleResult("failed", tries)
        delay = min(retry_delay_ms(tries, rng), left)
        if tries == 1:
            log.warning(
                "jobs.settle.retrying",
                extra={**fields(), "lease_left_ms": left, "error": f"{error}"},
            )
        await asyncio.sleep(delay / 1000)
