"""Every setting a service reads, from the environment, once, into a frozen object.

Only ``services/`` reads the environment (STYLE #10), and only through this module: each
service builds its config at start (``WorkerConfig.load(env, queues=...)``) and a bad value
fails right there with the variable's name, what was wrong and, for a near miss, "did you
mean" — never minutes later inside a loop. A ``UJOBS_*`` variable nobody reads is refused the
same way, because a typo (``UJOBS_CONCURENCY=32``) silently running on the default is the
worst kind of wrong. Command-line flags override the environment and are validated by the
same parsers.

``VARIABLES`` is the table of every variable, what it means and its default: the README's
configuration section and the compose test read it, so the documentation cannot drift from
the parser.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from ujobs.drivers.base import DEFAULT_QUEUE, DEFAULT_VISIBILITY_MS
from ujobs.errors import DriverUnavailableError
from ujobs.lifecycle import DEFAULT_DRAIN_DEADLINE_MS
from ujobs.outbox.relay import DEFAULT_BATCH_SIZE, DEFAULT_CLAIM_LEASE_MS
from ujobs.results import DEFAULT_RESULT_MAX_BYTES
from ujobs.retention.builtin import RetentionWindows
from ujobs.retention.purge import DEFAULT_PURGE_CRON
from ujobs.services.config.parse import (
    Concurrency,
    app_spec,
    choice,
    cron_expression,
    did_you_mean,
    driver_name,
    environment_name,
    host_name,
    invalid,
    key_prefix,
    nats_prefix,
    on_off,
    optional,
    parse_concurrency,
    parse_job_names,
    parse_queues,
    parse_strict_queues,
    public_base_url,
    purge_on,
    tcp_port,
    urls,
    whole_from,
)
from ujobs.services.config.variables import (
    CLAIM_AHEAD_PER_SLOT,
    DEFAULT_API_MAX_BODY_BYTES,
    DEFAULT_API_MAX_WAIT_MS,
    DEFAULT_API_PORT,
    DEFAULT_GC_THRESHOLD,
    DEFAULT_METRICS_PORT,
    DEFAULT_METRICS_REFRESH_MS,
    DEFAULT_NATS_MAX_ACK_PENDING,
    DEFAULT_NATS_MAX_DELIVERIES,
    DEFAULT_PG_POOL_SIZE,
    DEFAULT_REDIS_PREFIX,
    DEFAULT_SCHEDULER_LEASE_TTL_MS,
    DEFAULT_SCHEDULER_TICK_MS,
    EVENT_LOOPS,
    LOG_LEVELS,
    VARIABLES,
    DriverName,
    Env,
)
from ujobs.services.redact import redact_url

T = TypeVar("T")
_DEFAULT_QUEUES: tuple[str, ...] = (DEFAULT_QUEUE,)


def environment() -> dict[str, str]:
    """A snapshot of this process's environment: the one read of it in the codebase."""
    return dict(os.environ)


class _Source:
    """One environment plus the command line's overrides: a flag given wins over its
    variable, and both are refused by the same parser under a name that says which."""

    def __init__(self, env: Env) -> None:
        self.env = env

    def read(
        self,
        name: str,
        parse: Callable[[str, str], T],
        default: T,
        *,
        flag: str | None = None,
        given: object = None,
    ) -> T:
        assert name in VARIABLES, name
        if given is not None:
            return parse(f"{flag} / {name}" if flag else name, str(given))
        raw = self.env.get(name)
        if raw is None or raw.strip() == "":
            return default
        return parse(name, raw)


def check_unknown(env: Env) -> None:
    """A ``UJOBS_*`` variable no service reads is a typo until proven otherwise."""
    known = [n for n in VARIABLES if n.startswith("UJOBS_")]
    for name in sorted(env):
        if name.startswith("UJOBS_") and name not in VARIABLES:
            raise invalid(name, "no ujobs service reads this variable" + did_you_mean(name, known))


@dataclass(frozen=True, slots=True)
class Connections:
    """Where the backends are. ``__repr__`` masks every password."""

    database_url: str | None = None
    redis_url: str | None = None
    nats_url: str | None = None
    driver: DriverName = "postgres"
    pg_pool_size: int = DEFAULT_PG_POOL_SIZE
    redis_prefix: str = DEFAULT_REDIS_PREFIX
    settlements: bool = False
    """``UJOBS_NATS_SETTLEMENTS``: the Postgres driver writes the settlements outbox."""

    def __repr__(self) -> str:
        shown = ", ".join(f"{k}={v!r}" for k, v in self.public().items())
        return f"Connections({shown}, pg_pool_size={self.pg_pool_size})"

    def public(self) -> dict[str, str | None]:
        """What a start-up log line may say about these (passwords masked)."""
        return {
            "database": None if self.database_url is None else redact_url(self.database_url),
            "redis": None if self.redis_url is None else redact_url(self.redis_url),
            "nats": None if self.nats_url is None else redact_url(self.nats_url),
            "driver": self.driver,
            "redis_prefix": self.redis_prefix,
        }

    def require_database(self, service: str) -> str:
        if self.database_url is None:
            raise DriverUnavailableError(
                f"DATABASE_URL: {service} needs Postgres; set DATABASE_URL=postgresql://… "
                "(or run `ujobs dev` for an embedded one)",
                meta={"variable": "DATABASE_URL"},
            )
        return self.database_url

    def require_redis(self, service: str) -> str:
        if self.redis_url is None:
            raise DriverUnavailableError(
                f"REDIS_URL: {service} with UJOBS_DRIVER=redis needs REDIS_URL=redis://…",
                meta={"variable": "REDIS_URL"},
            )
        return self.redis_url

    def require_backend(self, service: str) -> None:
        """The queue's own backend: Redis for UJOBS_DRIVER=redis, Postgres otherwise."""
        if self.driver == "redis":
            self.require_redis(service)
        else:
            self.require_database(service)


@dataclass(frozen=True, slots=True)
class CommonConfig:
    """What every service reads: who it is, where the backends are, the app, logs, drain."""

    service: str
    connections: Connections
    app: str | None = None
    log_level: str = "info"
    drain_deadline_ms: int = DEFAULT_DRAIN_DEADLINE_MS
    purge_cron: str | None = DEFAULT_PURGE_CRON
    """When the scheduler enqueues the built-in ``x.purge``; None: ``UJOBS_PURGE=off``."""
    environment: str | None = None
    """``UJOBS_ENVIRONMENT``: what a backfill's ``environments=`` is checked against."""
    retention: RetentionWindows = field(default_factory=RetentionWindows)
    """``UJOBS_PURGE_*_RETENTION_MS``: how old a row must be for ``x.purge`` to delete it."""
    gc_threshold: int = DEFAULT_GC_THRESHOLD
    """``UJOBS_GC_THRESHOLD``: the collector's first threshold once the service started."""
    event_loop: str = "auto"
    """``UJOBS_EVENT_LOOP``: auto, uvloop or asyncio (``ujobs.services.runtime.event_loop``)."""
    clock_offset_ms: int = 0
    """``UJOBS_CLOCK_OFFSET_MS``: test-only, how far ahead of the wall clock this service's
    clock reads (``ujobs.clock.shift_system_clock``)."""

    @property
    def log_level_number(self) -> int:
        return int(logging.getLevelName(self.log_level.upper()))


def read_common(
    env: Env,
    service: str,
    *,
    app: str | None = None,
    driver: str | None = None,
    database_url: str | None = None,
) -> CommonConfig:
    """The shared half of every service's config; refuses unknown ``UJOBS_*`` first."""
    check_unknown(env)
    src = _Source(env)
    connections = Connections(
        database_url=src.read(
            "DATABASE_URL",
            urls("postgresql", "postgres"),
            None,
            flag="--database-url",
            given=database_url,
        ),
        redis_url=src.read("REDIS_URL", urls("redis", "rediss", "unix"), None),
        nats_url=src.read("NATS_URL", urls("nats", "tls", "ws", "wss"), None),
        driver=src.read("UJOBS_DRIVER", driver_name, "postgres", flag="--driver", given=driver),
        pg_pool_size=src.read("UJOBS_PG_POOL_SIZE", whole_from(1), DEFAULT_PG_POOL_SIZE),
        redis_prefix=src.read("UJOBS_REDIS_PREFIX", key_prefix, DEFAULT_REDIS_PREFIX),
        settlements=src.read("UJOBS_NATS_SETTLEMENTS", on_off, False),
    )
    return CommonConfig(
        service=service,
        connections=connections,
        app=src.read("UJOBS_APP", optional(app_spec), None, flag="--app", given=app),
        log_level=src.read("UJOBS_LOG_LEVEL", lambda n, r: choice(n, r, LOG_LEVELS), "info"),
        drain_deadline_ms=src.read(
            "UJOBS_DRAIN_DEADLINE_MS", whole_from(0), DEFAULT_DRAIN_DEADLINE_MS
        ),
        gc_threshold=src.read("UJOBS_GC_THRESHOLD", whole_from(0), DEFAULT_GC_THRESHOLD),
        event_loop=src.read("UJOBS_EVENT_LOOP", lambda n, r: choice(n, r, EVENT_LOOPS), "auto"),
        purge_cron=(
            src.read("UJOBS_PURGE_CRON", cron_expression, DEFAULT_PURGE_CRON)
            if src.read("UJOBS_PURGE", purge_on, True)
            else None
        ),
        environment=src.read("UJOBS_ENVIRONMENT", environment_name, None),
        clock_offset_ms=src.read("UJOBS_CLOCK_OFFSET_MS", whole_from(0), 0),
        retention=RetentionWindows(
            done_ms=src.read(
                "UJOBS_PURGE_DONE_RETENTION_MS", whole_from(1), RetentionWindows().done_ms
            ),
            dead_ms=src.read(
                "UJOBS_PURGE_DEAD_RETENTION_MS", whole_from(1), RetentionWindows().dead_ms
            ),
            outbox_ms=src.read(
                "UJOBS_PURGE_OUTBOX_RETENTION_MS", whole_from(1), RetentionWindows().outbox_ms
            ),
            webhooks_ms=src.read(
                "UJOBS_PURGE_WEBHOOKS_RETENTION_MS", whole_from(1), RetentionWindows().webhooks_ms
            ),
            settlements_ms=src.read(
                "UJOBS_PURGE_SETTLEMENTS_RETENTION_MS",
                whole_from(1),
                RetentionWindows().settlements_ms,
            ),
        ),
    )


@dataclass(frozen=True, slots=True)
class MetricsEndpoint:
    """Where a service without an api serves /metrics, /healthz and /readyz.

    ``explicit``: UJOBS_METRICS_PORT was set. Either way a port that cannot be bound stops the
    service at start; the refusal of the default port says to give each service its own.
    """

    host: str = "127.0.0.1"
    port: int = DEFAULT_METRICS_PORT
    explicit: bool = False


def read_metrics(env: Env) -> MetricsEndpoint:
    src = _Source(env)
    return MetricsEndpoint(
        host=src.read("UJOBS_METRICS_HOST", host_name, "127.0.0.1"),
        port=src.read("UJOBS_METRICS_PORT", tcp_port, DEFAULT_METRICS_PORT),
        explicit=(env.get("UJOBS_METRICS_PORT") or "").strip() != "",
    )


# --- per service -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    """``ujobs worker`` (and the two pinned workers, and ``ujobs dev``'s)."""

    common: CommonConfig
    queues: tuple[str, ...] = (DEFAULT_QUEUE,)
    concurrency: Concurrency = field(default_factory=Concurrency)
    max_in_flight: int | None = None
    visibility_timeout_ms: int = DEFAULT_VISIBILITY_MS
    claim_ahead: int | None = None
    """None: ``CLAIM_AHEAD_PER_SLOT`` rows per slot of the one queue (``claim_ahead_rows()``)."""
    metrics: MetricsEndpoint = field(default_factory=MetricsEndpoint)
    result_max_bytes: int = DEFAULT_RESULT_MAX_BYTES
    """``UJOBS_RESULT_MAX_BYTES``: the largest result the worker stores (``ujobs.results``)."""
    strict_queues: tuple[str, ...] = ()
    """``UJOBS_STRICT_QUEUES``: the queues claimed first-in first-out (``("*",)``: all);
    every other queue is tenant-fair."""
    queues_given: bool = True
    """False: neither UJOBS_QUEUES nor --queues named any, so ``ujobs worker`` serves every
    queue the app's jobs name (``ujobs.services.worker.app_queues``) instead of ``queues``."""

    def fair(self) -> bool | dict[str, bool]:
        """The worker's ``fair=``: False when ``UJOBS_STRICT_QUEUES`` is ``*``, else the
        served queues it names mapped to False (the ones it names that this worker does not
        serve are another worker's business)."""
        if self.strict_queues == ("*",):
            return False
        return {q: False for q in self.strict_queues if q in self.queues}

    def claim_ahead_rows(self) -> int:
        """The worker's ``claim_ahead``: 0 for several queues (the library claims ahead only
        for one), else ``UJOBS_CLAIM_AHEAD``, by default at most sixteen rows per slot of that
        queue (the buffer follows the pace within it: ``ujobs.worker.claim_ahead``)."""
        if len(self.queues) != 1:
            return 0
        if self.claim_ahead is not None:
            return self.claim_ahead
        return CLAIM_AHEAD_PER_SLOT * self.concurrency.for_queue(self.queues[0])

    @classmethod
    def load(
        cls,
        env: Env,
        *,
        service: str = "worker",
        queues: str | None = None,
        pinned_queues: tuple[str, ...] | None = None,
        app: str | None = None,
        driver: str | None = None,
        concurrency: str | None = None,
        max_in_flight: int | None = None,
        require_backend: bool = True,
    ) -> WorkerConfig:
        """``pinned_queues`` (the webhook deliverer's, the exporter's) ignore UJOBS_QUEUES."""
        common = read_common(env, service, app=app, driver=driver)
        src = _Source(env)
        chosen = (
            pinned_queues
            if pinned_queues is not None
            else src.read(
                "UJOBS_QUEUES", parse_queues, _DEFAULT_QUEUES, flag="--queues", given=queues
            )
        )
        named = (env.get("UJOBS_QUEUES") or "").strip() != ""
        config = cls(
            common=common,
            queues=chosen,
            queues_given=pinned_queues is not None or queues is not None or named,
            concurrency=src.read(
                "UJOBS_CONCURRENCY",
                parse_concurrency,
                Concurrency(),
                flag="--concurrency",
                given=concurrency,
            ),
            max_in_flight=src.read(
                "UJOBS_MAX_IN_FLIGHT",
                optional(whole_from(1)),
                None,
                flag="--max-in-flight",
                given=max_in_flight,
            ),
            visibility_timeout_ms=src.read(
                "UJOBS_VISIBILITY_TIMEOUT_MS", whole_from(1_000), DEFAULT_VISIBILITY_MS
            ),
            claim_ahead=src.read("UJOBS_CLAIM_AHEAD", optional(whole_from(0)), None),
            strict_queues=src.read("UJOBS_STRICT_QUEUES", parse_strict_queues, ()),
            metrics=read_metrics(env),
            result_max_bytes=src.read(
                "UJOBS_RESULT_MAX_BYTES", whole_from(1), DEFAULT_RESULT_MAX_BYTES
            ),
        )
        if require_backend:
            common.connections.require_backend(service)
        return config


@dataclass(frozen=True, slots=True)
class ApiConfig:
    """``ujobs api``."""

    common: CommonConfig
    host: str = "127.0.0.1"
    port: int = DEFAULT_API_PORT
    metrics_refresh_ms: int = DEFAULT_METRICS_REFRESH_MS
    max_body_bytes: int = DEFAULT_API_MAX_BODY_BYTES
    max_wait_ms: int = DEFAULT_API_MAX_WAIT_MS
    """``UJOBS_API_MAX_WAIT_MS``: the cap on ``?wait=`` (``ujobs.services.api.results``)."""
    rate_per_token: int | None = None
    """Requests per second per token (a bucket of one second's worth); None: no limit."""
    nats_prefix: str = "ujobs"
    """The NATS edge's subject and stream prefix (``ujobs.services.nats.names``)."""
    nats_ack_wait_ms: int = 30_000
    """How long the enqueue stream's consumer waits for an ack before redelivering."""
    nats_max_ack_pending: int = DEFAULT_NATS_MAX_ACK_PENDING
    """The most enqueue-stream messages the api holds unacked (the consumer's
    ``max_ack_pending``, and the api's pull window)."""
    nats_max_deliveries: int = DEFAULT_NATS_MAX_DELIVERIES
    """The delivery on which a stream message still failing unexpectedly is refused."""
    nats_settlement_results: tuple[str, ...] = ()
    """``UJOBS_NATS_SETTLEMENT_RESULTS``: the jobs whose ``completed`` settlements carry their
    ``result`` (``("*",)``: every job; empty: none)."""
    result_max_bytes: int = DEFAULT_RESULT_MAX_BYTES
    """``UJOBS_RESULT_MAX_BYTES``: a settlement carries no result bigger than this."""
    public_url: str | None = None
    """``UJOBS_PUBLIC_URL``: where the links the api hands out point
    (``ujobs.services.api.public_url``)."""

    @classmethod
    def load(
        cls,
        env: Env,
        *,
        service: str = "api",
        app: str | None = None,
        host: str | None = None,
        port: int | None = None,
        require_backend: bool = True,
    ) -> ApiConfig:
        common = read_common(env, service, app=app)
        src = _Source(env)
        config = cls(
            common=common,
            host=src.read("UJOBS_API_HOST", host_name, "127.0.0.1", flag="--host", given=host),
            port=src.read("UJOBS_API_PORT", tcp_port, DEFAULT_API_PORT, flag="--port", given=port),
            metrics_refresh_ms=src.read(
                "UJOBS_METRICS_REFRESH_MS", whole_from(0), DEFAULT_METRICS_REFRESH_MS
            ),
            max_body_bytes=src.read(
                "UJOBS_API_MAX_BODY_BYTES", whole_from(1_024), DEFAULT_API_MAX_BODY_BYTES
            ),
            max_wait_ms=src.read("UJOBS_API_MAX_WAIT_MS", whole_from(0), DEFAULT_API_MAX_WAIT_MS),
            rate_per_token=src.read("UJOBS_API_RATE_PER_TOKEN", optional(whole_from(1)), None),
            nats_prefix=src.read("UJOBS_NATS_PREFIX", nats_prefix, "ujobs"),
            nats_ack_wait_ms=src.read("UJOBS_NATS_ACK_WAIT_MS", whole_from(1_000), 30_000),
            nats_max_ack_pending=src.read(
                "UJOBS_NATS_MAX_ACK_PENDING", whole_from(1), DEFAULT_NATS_MAX_ACK_PENDING
            ),
            nats_settlement_results=src.read("UJOBS_NATS_SETTLEMENT_RESULTS", parse_job_names, ()),
            result_max_bytes=src.read(
                "UJOBS_RESULT_MAX_BYTES", whole_from(1), DEFAULT_RESULT_MAX_BYTES
            ),
            nats_max_deliveries=src.read(
                "UJOBS_NATS_MAX_DELIVERIES", whole_from(1), DEFAULT_NATS_MAX_DELIVERIES
            ),
            public_url=src.read("UJOBS_PUBLIC_URL", optional(public_base_url), None),
        )
        if require_backend:
            common.connections.require_backend(service)
        return config


@dataclass(frozen=True, slots=True)
class SchedulerConfig:
    """``ujobs scheduler``: Postgres always (durable watermarks, the leader lease)."""

    common: CommonConfig
    tick_interval_ms: int = DEFAULT_SCHEDULER_TICK_MS
    lease_ttl_ms: int = DEFAULT_SCHEDULER_LEASE_TTL_MS
    metrics: MetricsEndpoint = field(default_factory=MetricsEndpoint)

    @classmethod
    def load(
        cls,
        env: Env,
        *,
        service: str = "scheduler",
        app: str | None = None,
        require_backend: bool = True,
    ) -> SchedulerConfig:
        common = read_common(env, service, app=app)
        src = _Source(env)
        config = cls(
            common=common,
            tick_interval_ms=src.read(
                "UJOBS_SCHEDULER_TICK_INTERVAL_MS", whole_from(10), DEFAULT_SCHEDULER_TICK_MS
            ),
            lease_ttl_ms=src.read(
                "UJOBS_SCHEDULER_LEASE_TTL_MS", whole_from(1_000), DEFAULT_SCHEDULER_LEASE_TTL_MS
            ),
            metrics=read_metrics(env),
        )
        if require_backend:
            common.connections.require_database(service)
        return config


@dataclass(frozen=True, slots=True)
class RelayConfig:
    """``ujobs relay``: the outbox is in Postgres, whatever the queue's driver."""

    common: CommonConfig
    claim_lease_ms: int = DEFAULT_CLAIM_LEASE_MS
    batch_size: int = DEFAULT_BATCH_SIZE
    metrics: MetricsEndpoint = field(default_factory=MetricsEndpoint)

    @classmethod
    def load(
        cls,
        env: Env,
        *,
        service: str = "relay",
        app: str | None = None,
        require_backend: bool = True,
    ) -> RelayConfig:
        common = read_common(env, service, app=app)
        src = _Source(env)
        config = cls(
            common=common,
            claim_lease_ms=src.read(
                "UJOBS_OUTBOX_CLAIM_LEASE_MS", whole_from(1), DEFAULT_CLAIM_LEASE_MS
            ),
            batch_size=src.read("UJOBS_OUTBOX_BATCH_SIZE", whole_from(1), DEFAULT_BATCH_SIZE),
            metrics=read_metrics(env),
        )
        if require_backend:
            common.connections.require_database(service)
            common.connections.require_backend(service)
        return config


@dataclass(frozen=True, slots=True)
class NatsStatusConfig:
    """``ujobs nats status``: NATS (required), the prefix, Postgres when set (the outbox)."""

    common: CommonConfig
    nats_url: str
    prefix: str = "ujobs"

    @classmethod
    def load(cls, env: Env, *, prefix: str | None = None) -> NatsStatusConfig:
        common = read_common(env, "cli")
        nats_url = common.connections.nats_url
        if nats_url is None:
            raise DriverUnavailableError(
                "NATS_URL: ujobs nats status needs NATS_URL=nats://…", meta={"variable": "NATS_URL"}
            )
        src = _Source(env)
        chosen = src.read("UJOBS_NATS_PREFIX", nats_prefix, "ujobs", flag="--prefix", given=prefix)
        return cls(common=common, nats_url=nats_url, prefix=chosen)


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    """The operator commands (``ujobs jobs …``, ``queues``, ``workers``): one backend."""

    common: CommonConfig

    @classmethod
    def load(
        cls, env: Env, *, database_url: str | None = None, driver: str | None = None
    ) -> OperatorConfig:
        common = read_common(env, "cli", driver=driver, database_url=database_url)
        common.connections.require_backend("this command")
        return cls(common=common)
