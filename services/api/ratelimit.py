"""The api's per-token rate limit (``UJOBS_API_RATE_PER_TOKEN``): a token bucket per token.

Each token's bucket holds one second's worth of requests (``rate``) and refills continuously
on the driver's clock, so a burst up to ``rate`` passes and a steady stream is held to ``rate``
a second. An empty bucket is ``X_RATE_LIMITED`` (429) with the wait until the next request
would pass, which the api sends as ``Retry-After`` (whole seconds, rounded up). The buckets
live in this process: N api replicas allow N times the rate, like every in-process limit.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ujobs.clock import Clock
from ujobs.errors import RateLimitedError


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at_ms: int


class TokenBuckets:
    """``take(token_id)`` spends one request of that token's bucket, or raises 429."""

    def __init__(self, rate: int | None, clock: Clock) -> None:
        self.rate = rate
        self.clock = clock
        self._buckets: dict[str, _Bucket] = {}

    def take(self, token_id: str) -> None:
        rate = self.rate
        if rate is None:
            return
        now = self.clock.now_ms()
        bucket = self._buckets.get(token_id)
        if bucket is None:
            bucket = self._buckets[token_id] = _Bucket(tokens=float(rate), at_ms=now)
        elapsed = max(0, now - bucket.at_ms)
        bucket.tokens = min(float(rate), bucket.tokens + elapsed * rate / 1000)
        bucket.at_ms = now
        if bucket.tokens >= 1:
            bucket.tokens -= 1
            return
        wait_ms = math.ceil((1 - bucket.tokens) * 1000 / rate)
        raise RateLimitedError(
            f"this token made more than {rate} requests a second (UJOBS_API_RATE_PER_TOKEN); "
            f"retry in {wait_ms} ms",
            meta={"retryAfterMs": wait_ms, "rate": rate},
        )


def retry_after_header(error: RateLimitedError) -> dict[str, str]:
    """``Retry-After`` in whole seconds, at least 1 (the header has no finer unit)."""
    wait_ms = error.meta.get("retryAfterMs", 1000)
    return {"Retry-After": str(max(1, math.ceil(int(wait_ms) / 1000)))}


__all__ = ["TokenBuckets", "retry_after_header"]
