"""``LimitConfig``: per-PROCESS caps, the fast path in front of the fleet-wide ``concurrency``.

Everything here lives in one heap, so it multiplies by the replica count: ``per_tenant=2`` on
twenty pods is forty concurrent runs, and the rate window restarts with the process. Size it as
a per-pod budget, never as a partner's contractual rate. Over any cap the claimed job is handed
straight back without burning an attempt (``hand_back``), so one org's import cannot starve
the rest.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.durations import Duration, duration_ms
from ujobs.errors import InvariantError


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``limit`` run starts per ``window`` (a token bucket refilled continuously)."""

    limit: int
    window: Duration = 1_000

    def __post_init__(self) -> None:
        _whole("rate.limit", self.limit)
        if duration_ms(self.window, field="rate.window") <= 0:
            raise InvariantError("rate.window must be above zero")


def _whole(field: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvariantError(f"{field} must be a whole number of at least 1, got {value!r}")


@dataclass(frozen=True, slots=True)
class LimitConfig:
    """Per-process caps. ``per_queue`` is one number for every queue or a table per queue."""

    per_tenant: int | None = None
    per_queue: int | Mapping[str, int] | None = None
    global_: int | None = None
    rate_per_tenant: Rate | None = None

    def __post_init__(self) -> None:
        if self.per_tenant is not None:
            _whole("limits.per_tenant", self.per_tenant)
        if self.global_ is not None:
            _whole("limits.global_", self.global_)
        if isinstance(self.per_queue, Mapping):
            for queue, cap in self.per_queue.items():
                _whole(f"limits.per_queue[{queue!r}]", cap)
        elif self.per_queue is not None:
            _whole("limits.per_queue", self.per_queue)

    def queue_cap(self, queue: str) -> int | None:
        if isinstance(self.per_queue, Mapping):
            return self.per_queue.get(queue)
        return self.per_queue


ShedReason = str


@dataclass(slots=True)
class _Bucket:
    tokens: float
    at_ms: int


@dataclass
class LimitLease:
    """One admitted run; ``release()`` returns its slots (safe twice)."""

    limiter: Limiter
    queue: str
    tenant: str | None
    released: bool = False

    def release(self) -> None:
        if not self.released:
            self.released = True
            self.limiter._release(self)


@dataclass
class Limiter:
    """The three maps (tenant, queue, global) plus the per-tenant token buckets."""

    config: LimitConfig
    clock: Clock = SYSTEM_CLOCK
    _tenants: dict[str, int] = field(default_factory=dict)
    _queues: dict[str, int] = field(default_factory=dict)
    _global: int = 0
    _buckets: dict[str, _Bucket] = field(default_factory=dict)

    def try_acquire(self, queue: str, tenant: str | None) -> LimitLease | ShedReason:
        """A lease when every cap has room, else the name of the cap that shed the run."""
        cfg = self.config
        if cfg.global_ is not None and self._global >= cfg.global_:
            return "global"
        cap = cfg.queue_cap(queue)
        if cap is not None and self._queues.get(queue, 0) >= cap:
            return "per_queue"
        if tenant is not None:
            if cfg.per_tenant is not None and self._tenants.get(tenant, 0) >= cfg.per_tenant:
                return "per_tenant"
            if cfg.rate_per_tenant is not None and not self._take_token(tenant):
                return "rate_per_tenant"
        self._global += 1
        self._queues[queue] = self._queues.get(queue, 0) + 1
        if tenant is not None:
            self._tenants[tenant] = self._tenants.get(tenant, 0) + 1
        return LimitLease(self, queue, tenant)

    def in_flight(self) -> int:
        return self._global

    def _take_token(self, tenant: str) -> bool:
        rate = self.config.rate_per_tenant
        assert rate is not None
        window = duration_ms(rate.window, field="rate.window")
        now = self.clock.now_ms()
        bucket = self._buckets.get(tenant)
        if bucket is None:
            bucket = self._buckets[tenant] = _Bucket(tokens=float(rate.limit), at_ms=now)
        elapsed = max(0, now - bucket.at_ms)
        bucket.tokens = min(float(rate.limit), bucket.tokens + elapsed * rate.limit / window)
        bucket.at_ms = now
        if bucket.tokens + 1e-9 < 1:
            return False
        bucket.tokens -= 1
        return True

    def next_token_in_ms(self, tenant: str) -> int:
        """How long until ``tenant`` has a token again (0 when it has one now)."""
        rate = self.config.rate_per_tenant
        bucket = self._buckets.get(tenant)
        if rate is None or bucket is None or bucket.tokens >= 1:
            return 0
        window = duration_ms(rate.window, field="rate.window")
        return math.ceil((1 - bucket.tokens) * window / rate.limit)

    def _release(self, lease: LimitLease) -> None:
        self._global = max(0, self._global - 1)
        left = self._queues.get(lease.queue, 0) - 1
        if left > 0:
            self._queues[lease.queue] = left
        else:
            self._queues.pop(lease.queue, None)
        if lease.tenant is not None:
            held = self._tenants.get(lease.tenant, 0) - 1
            if held > 0:
                self._tenants[lease.tenant] = held
            else:
                self._tenants.pop(lease.tenant, None)
