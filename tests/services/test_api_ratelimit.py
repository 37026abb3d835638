"""The per-token rate limit: a token bucket of one second's worth, 429 with Retry-After."""

from __future__ import annotations

from typing import Any

import pytest

from tests.services.api_support import MakeClient, make_api
from ujobs.clock import FrozenClock
from ujobs.errors import ConfigInvalidError, RateLimitedError
from ujobs.services.api.ratelimit import TokenBuckets
from ujobs.services.config.settings import ApiConfig


def test_a_bucket_holds_one_seconds_worth_and_refills() -> None:
    clock = FrozenClock()
    buckets = TokenBuckets(4, clock)
    for _ in range(4):
        buckets.take("a")
    with pytest.raises(RateLimitedError) as caught:
        buckets.take("a")
    assert caught.value.meta["retryAfterMs"] == 250
    buckets.take("b")
    clock.advance(249)
    with pytest.raises(RateLimitedError):
        buckets.take("a")
    clock.advance(1)
    buckets.take("a")
    clock.advance(60_000)
    for _ in range(4):
        buckets.take("a")
    with pytest.raises(RateLimitedError):
        buckets.take("a")


def test_no_rate_is_no_limit() -> None:
    buckets = TokenBuckets(None, FrozenClock())
    for _ in range(10_000):
        buckets.take("a")


@pytest.mark.parametrize("raw", ["0", "-1", "fast"])
def test_a_bad_rate_fails_at_start(raw: str) -> None:
    with pytest.raises(ConfigInvalidError, match="UJOBS_API_RATE_PER_TOKEN"):
        ApiConfig.load({"DATABASE_URL": "postgresql://x/y", "UJOBS_API_RATE_PER_TOKEN": raw})


async def test_over_the_rate_is_429_with_retry_after(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: Any
) -> None:
    clock = FrozenClock()
    api = await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock, UJOBS_API_RATE_PER_TOKEN="2")
    busy = await api.token("read")
    calm = await api.token("read")
    headers = {"Authorization": f"Bearer {busy}"}
    assert (await api.client.get("/v1/jobs", headers=headers)).status == 200
    assert (await api.client.get("/v1/jobs", headers=headers)).status == 200
    throttled = await api.client.get("/v1/jobs", headers=headers)
    assert throttled.status == 429
    assert throttled.headers["Retry-After"] == "1"
    body = await throttled.json()
    assert body["error"]["code"] == "X_RATE_LIMITED"
    assert body["error"]["meta"]["retryAfterMs"] == 500
    # Another token has a bucket of its own.
    assert (await api.call("GET", "/v1/jobs", calm))[0] == 200
    clock.advance(500)
    assert (await api.client.get("/v1/jobs", headers=headers)).status == 200
    # An unauthenticated request spends no token's bucket: it is 401 before the limit.
    assert (await api.call("GET", "/v1/jobs", "ujobs_unknown"))[0] == 401
