"""The table of every environment variable a ujobs service reads.

``VARIABLES`` is what the generated configuration page (docs/reference/configuration.md), the
compose test and the unknown-variable check (``check_unknown``) read, so the documentation, the
deployment files and the parser cannot drift apart. Parsing lives in ``config.parse``; the
frozen per-service objects in ``config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from ujobs.drivers.base import DEFAULT_VISIBILITY_MS
from ujobs.lifecycle import DEFAULT_DRAIN_DEADLINE_MS
from ujobs.outbox.relay import DEFAULT_BATCH_SIZE, DEFAULT_CLAIM_LEASE_MS
from ujobs.results import DEFAULT_RESULT_MAX_BYTES

DriverName = Literal["postgres", "redis"]
DRIVERS: tuple[DriverName, ...] = ("postgres", "redis")
LOG_LEVELS = ("debug", "info", "warning", "error")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
JOBS_CONCURRENCY_DEFAULT = 8
"""Slots per queue when ``UJOBS_CONCURRENCY`` names no number for it (the spec's default)."""
CLAIM_AHEAD_PER_SLOT = 16
"""``ujobs worker``'s claim-ahead on one queue when ``UJOBS_CLAIM_AHEAD`` is unset: the most
rows per slot. The buffer holds about 50 ms of the worker's pace within it, and never fewer
than three rows a slot (``ujobs.worker.claim_ahead``). On short jobs it fills this far, and
each claim and ack statement of a one-worker drain carries about three times the rows that a
fixed three per slot allowed. The drain is then faster, and Postgres spends less CPU a job
(bench/RESULTS.md)."""
DEFAULT_API_PORT = 8080
DEFAULT_METRICS_PORT = 9464
"""The worker roles', relay's and scheduler's /metrics port (the OpenTelemetry Prometheus
exporter's registered default, so it clashes with neither the api nor Prometheus itself)."""
DEFAULT_METRICS_REFRESH_MS = 5_000
DEFAULT_API_MAX_BODY_BYTES = 1_048_576
DEFAULT_API_MAX_WAIT_MS = 60_000
"""The longest ``?wait=`` a result read or an enqueue-and-wait may ask for: a held request is a
held connection (and a proxy's idle timeout is often 60 s); a caller wanting longer asks again."""
DEFAULT_PG_POOL_SIZE = 10
DEFAULT_GC_THRESHOLD = 10_000
"""Allocations between two young collections in a service process (Python's own: 700;
``ujobs.services.runtime.gc_tuning``)."""
DEFAULT_REDIS_PREFIX = "ujobs"
DEFAULT_SCHEDULER_TICK_MS = 1_000
DEFAULT_SCHEDULER_LEASE_TTL_MS = 30_000
MAX_QUEUE_NAME = 128
DEFAULT_NATS_MAX_ACK_PENDING = 2_048
DEFAULT_NATS_MAX_DELIVERIES = 5

Env = Mapping[str, str]


@dataclass(frozen=True, slots=True)
class Variable:
    """One environment variable: its name, what it does, its default, who reads it."""

    name: str
    help: str
    default: str
    services: tuple[str, ...]


_ALL = ("api", "relay", "worker", "scheduler", "webhook-deliverer", "exporter", "dev")
_WORKERS = ("worker", "webhook-deliverer", "exporter", "dev")
_METRICS = ("relay", "worker", "scheduler", "webhook-deliverer", "exporter")

VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable(
            "DATABASE_URL",
            "Postgres of the queue, the outbox and the scheduler: postgresql://user:pass@host/db",
            "none (ujobs dev starts an embedded one)",
            (*_ALL, "db migrate", "operator commands"),
        ),
        Variable(
            "REDIS_URL",
            "Redis for the wake channel (and the queue with UJOBS_DRIVER=redis)",
            "none: the wake uses Postgres LISTEN/NOTIFY",
            _ALL,
        ),
        Variable(
            "NATS_URL",
            "NATS of the event-bus edge: nats://host:4222",
            "none",
            ("api", "nats status"),
        ),
        Variable(
            "UJOBS_NATS_SETTLEMENTS",
            "on: every ending of a run (a worker's settle, a claim burying a lapsed final "
            "attempt, an operator's cancel) also writes its settlements-outbox entry in the "
            "same statement or script (Postgres: x_settlements; Redis driver: the stream "
            "{prefix}:settled), for the api to publish to UJOBS_SETTLED; set it on every "
            "process that settles or cancels; off: the statements stay the plain ones",
            "off",
            (*_WORKERS, "api", "operator commands"),
        ),
        Variable(
            "UJOBS_NATS_SETTLEMENT_RESULTS",
            "the jobs (comma-separated names, or * for every job) whose completed settlements "
            "on UJOBS_SETTLED carry their result (a result over UJOBS_RESULT_MAX_BYTES is left "
            "out with resultTooLarge: true); Postgres driver",
            "none",
            ("api",),
        ),
        Variable(
            "UJOBS_NATS_ACK_WAIT_MS",
            "how long the api's consumer of UJOBS_ENQUEUE waits for a message's ack before it "
            "is delivered again (a message a crashed api held comes back after it)",
            "30000",
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_NATS_MAX_ACK_PENDING",
            "the most UJOBS_ENQUEUE messages the api holds unacked at once (the consumer's "
            "max_ack_pending)",
            str(DEFAULT_NATS_MAX_ACK_PENDING),
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_NATS_MAX_DELIVERIES",
            "the delivery on which a UJOBS_ENQUEUE message whose handling still fails with an "
            "unexpected error (X_INTERNAL) is given up: its error goes to "
            "ujobs.rejected.<job> and it is never delivered again (a database outage is "
            "retried without this bound); a message delivered 4 times this many without "
            "ending (an api died with it in hand) is refused at receipt with X_NATS_REDELIVERED",
            str(DEFAULT_NATS_MAX_DELIVERIES),
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_NATS_PREFIX",
            "first token of every NATS subject and stream name of the edge (ujobs.enqueue.<job>, "
            "UJOBS_ENQUEUE, ...): two deployments sharing one NATS pick two prefixes",
            "ujobs",
            ("api", "dev", "nats status"),
        ),
        Variable(
            "UJOBS_URL",
            "the api's base URL (https://jobs.example.com) for clients: the docs' HTTP "
            "snippets, and the operator commands that work remotely (jobs list, jobs show, "
            "queues list, tokens list) when DATABASE_URL is unset; every other operator "
            "command then answers X_CONFIG_INVALID naming DATABASE_URL",
            "none: the operator commands read DATABASE_URL",
            ("clients", "operator commands"),
        ),
        Variable(
            "UJOBS_TOKEN",
            "the bearer token (`ujobs tokens create`) sent with UJOBS_URL; queues list and "
            "tokens list need an operator token (tokens list: with admin), jobs list and show "
            "read, and a tenant token sees its tenant's jobs only",
            "none (required with UJOBS_URL when DATABASE_URL is unset)",
            ("clients", "operator commands"),
        ),
        Variable(
            "UJOBS_IMAGE",
            "compose.yaml: the image every service runs (an app's own image built FROM "
            "ultimate-jobs:local)",
            "ultimate-jobs:local",
            ("compose.yaml",),
        ),
        Variable(
            "UJOBS_APP_DIR",
            "compose.yaml: the app's directory, mounted read-only at /srv/app in every service",
            "compose.yaml's own directory",
            ("compose.yaml",),
        ),
        Variable(
            "UJOBS_APP_ENV",
            "compose.yaml: an optional file of the app's own settings (NAME=value a line) "
            "handed to every long-running service",
            "app.env beside compose.yaml, if it exists",
            ("compose.yaml",),
        ),
        Variable(
            "UJOBS_APP",
            "module:attribute of the value define_api() returned",
            "none (only the built-in families)",
            (*_ALL, "manifest", "tasks list"),
        ),
        Variable("UJOBS_DRIVER", "the queue's driver: postgres or redis", "postgres", _ALL),
        Variable(
            "UJOBS_QUEUES",
            "comma-separated queues a worker serves (ujobs dev: its worker)",
            "every queue the app's jobs name, and default (ujobs worker leaves webhooks and "
            "exports to the deliverer and the exporter)",
            ("worker", "dev"),
        ),
        Variable(
            "UJOBS_CONCURRENCY",
            "slots per queue: a number for every queue, or queue=n,queue=n (others get 8)",
            str(JOBS_CONCURRENCY_DEFAULT),
            _WORKERS,
        ),
        Variable(
            "UJOBS_MAX_IN_FLIGHT",
            "the most runs one worker process holds across every queue",
            "unset: no process cap",
            _WORKERS,
        ),
        Variable(
            "UJOBS_CLAIM_AHEAD",
            "the most rows a worker serving ONE queue claims beyond its free slots (at most 16 "
            "per slot); it holds about 50 ms of its recent pace, never fewer than 3 per slot; a "
            "row waits at most 500 ms, then goes back uncounted; 0 turns it off",
            f"{CLAIM_AHEAD_PER_SLOT} per slot of that queue",
            _WORKERS,
        ),
        Variable(
            "UJOBS_STRICT_QUEUES",
            "comma-separated queues claimed first-in first-out instead of tenant-fair (* for "
            "every queue); see 'Fair by tenant' in the controlling-jobs guide",
            "none: every queue is fair by tenant",
            _WORKERS,
        ),
        Variable(
            "UJOBS_RESULT_MAX_BYTES",
            "the largest job result stored, in bytes of JSON; a bigger one dead-letters the run "
            "with X_RESULT_TOO_LARGE (never truncated); the api's settlements carry none bigger "
            "(UJOBS_NATS_SETTLEMENT_RESULTS)",
            str(DEFAULT_RESULT_MAX_BYTES),
            (*_WORKERS, "api"),
        ),
        Variable(
            "UJOBS_VISIBILITY_TIMEOUT_MS",
            "a claim's lease; renewed every third of it while the job runs",
            str(DEFAULT_VISIBILITY_MS),
            _WORKERS,
        ),
        Variable(
            "UJOBS_DRAIN_DEADLINE_MS",
            "the SIGTERM drain's budget; keep the orchestrator's grace period above it",
            str(DEFAULT_DRAIN_DEADLINE_MS),
            _ALL,
        ),
        Variable("UJOBS_LOG_LEVEL", "debug, info, warning or error", "info", _ALL),
        Variable(
            "UJOBS_GC_THRESHOLD",
            "allocations between two young garbage collections in the service process (0: "
            "Python's default of 700); a higher one spends less CPU per job",
            str(DEFAULT_GC_THRESHOLD),
            _ALL,
        ),
        Variable(
            "UJOBS_EVENT_LOOP",
            "the service's event loop: uvloop (fewer instructions a job), asyncio (the "
            "standard library's), or auto: uvloop where it is installed (it is a dependency on "
            "Linux and macOS), else asyncio",
            "auto",
            _ALL,
        ),
        Variable(
            "UJOBS_CLOCK_OFFSET_MS",
            "TESTS ONLY: the service's clock reads this far ahead of the wall clock (an "
            "end-to-end test moves the services past a retention window); never set it in a "
            "deployment",
            "0",
            _ALL,
        ),
        Variable("UJOBS_API_HOST", "the api's listen address", "127.0.0.1", ("api", "dev")),
        Variable("UJOBS_API_PORT", "the api's port", str(DEFAULT_API_PORT), ("api", "dev")),
        Variable(
            "UJOBS_API_MAX_BODY_BYTES",
            "the largest request body the api reads; a larger one is 413 X_BODY_TOO_LARGE",
            str(DEFAULT_API_MAX_BODY_BYTES),
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_API_MAX_WAIT_MS",
            "the longest ?wait= a result read or an enqueue-and-wait may ask for; past it 400 "
            "X_INPUT_INVALID",
            str(DEFAULT_API_MAX_WAIT_MS),
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_API_RATE_PER_TOKEN",
            "requests per second one token may make to one api process, over HTTP and NATS "
            "request/reply together (a token bucket holding one second's worth); over it is 429 "
            "X_RATE_LIMITED with Retry-After (on NATS: the error reply, meta.retryAfterMs)",
            "unset: no limit",
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_METRICS_HOST",
            "where /metrics, /healthz and /readyz listen (the api serves them on its own port)",
            "127.0.0.1",
            _METRICS,
        ),
        Variable(
            "UJOBS_METRICS_PORT",
            "their port; 0 picks a free one. Busy: the service stops at start with "
            "X_CONFIG_INVALID (two services on one host: give each its own)",
            str(DEFAULT_METRICS_PORT),
            _METRICS,
        ),
        Variable(
            "UJOBS_METRICS_REFRESH_MS",
            "the queue gauges are read from the driver at most this often",
            str(DEFAULT_METRICS_REFRESH_MS),
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_PG_POOL_SIZE",
            "connections per process in the Postgres pool",
            str(DEFAULT_PG_POOL_SIZE),
            _ALL,
        ),
        Variable(
            "UJOBS_REDIS_PREFIX",
            "key prefix (hash tag) of the Redis driver's keys",
            DEFAULT_REDIS_PREFIX,
            _ALL,
        ),
        Variable(
            "UJOBS_OUTBOX_CLAIM_LEASE_MS",
            "how long a dead relay's claimed outbox rows wait before another relay takes them",
            str(DEFAULT_CLAIM_LEASE_MS),
            ("relay", "dev"),
        ),
        Variable(
            "UJOBS_OUTBOX_BATCH_SIZE",
            "outbox rows a relay claims per pass",
            str(DEFAULT_BATCH_SIZE),
            ("relay", "dev"),
        ),
        Variable(
            "UJOBS_SCHEDULER_TICK_INTERVAL_MS",
            "one scheduler round every …",
            str(DEFAULT_SCHEDULER_TICK_MS),
            ("scheduler", "dev"),
        ),
        Variable(
            "UJOBS_ENVIRONMENT",
            "this deployment's name (staging, production, …), checked against a backfill's "
            "environments=",
            "none: a backfill that names environments refuses to run",
            (*_WORKERS, "db backfill"),
        ),
        Variable(
            "UJOBS_PURGE",
            "on or off: the built-in x.purge retention sweep (x_jobs, steps, x_outbox, events, "
            "webhook deliveries and events, settlements)",
            "on",
            (*_WORKERS, "scheduler"),
        ),
        Variable(
            "UJOBS_PURGE_DONE_RETENTION_MS",
            "x.purge deletes done jobs (and their steps) finished longer ago than this",
            "1209600000 (14 days)",
            (*_WORKERS, "db purge"),
        ),
        Variable(
            "UJOBS_PURGE_DEAD_RETENTION_MS",
            "x.purge deletes dead, failed and cancelled jobs finished longer ago than this",
            "7776000000 (90 days)",
            (*_WORKERS, "db purge"),
        ),
        Variable(
            "UJOBS_PURGE_OUTBOX_RETENTION_MS",
            "x.purge deletes outbox rows published longer ago than this",
            "604800000 (7 days)",
            (*_WORKERS, "db purge"),
        ),
        Variable(
            "UJOBS_PURGE_WEBHOOKS_RETENTION_MS",
            "x.purge deletes webhook ledger rows recorded longer ago than this (never those of "
            "a delivery still queued), then events no ledger row or queued delivery names",
            "2592000000 (30 days)",
            (*_WORKERS, "db purge"),
        ),
        Variable(
            "UJOBS_PURGE_SETTLEMENTS_RETENTION_MS",
            "x.purge deletes x_settlements rows published to UJOBS_SETTLED longer ago than this "
            "(never a pending one)",
            "86400000 (1 day)",
            (*_WORKERS, "db purge"),
        ),
        Variable(
            "UJOBS_PURGE_CRON",
            "when the scheduler enqueues x.purge (a cron line, UTC)",
            "0 * * * * (hourly)",
            ("scheduler", "dev"),
        ),
        Variable(
            "UJOBS_SCHEDULER_LEASE_TTL_MS",
            "the scheduler leader lease's TTL; renewed every third of it",
            str(DEFAULT_SCHEDULER_LEASE_TTL_MS),
            ("scheduler", "dev"),
        ),
        Variable(
            "UJOBS_EXPORT_URL",
            "where exports declared without sink= are written: a path, file://, s3://bucket/"
            "prefix, gs://, az:// (credentials and endpoint from the store's own AWS_* / "
            "GOOGLE_* / AZURE_* variables)",
            ".ujobs/exports",
            ("exporter", "api", "dev", "exports"),
        ),
        Variable(
            "UJOBS_PUBLIC_URL",
            "the api's address as its users reach it (https://jobs.example.com, a path prefix "
            "allowed): the host of the links it hands out (an export part's download), never "
            "taken from a request's Host header",
            "none: no such link (the part answers X_CONFIG_INVALID naming this variable); "
            "ujobs dev links to the request's own host",
            ("api", "dev"),
        ),
        Variable(
            "UJOBS_SECRET_KEY",
            "base64 32-byte key sealing webhook endpoint secrets at rest (AES-GCM; id:key,id:key "
            "while rotating: the first seals, every one opens) and signing the api's expiring "
            "download links for exports on the filesystem",
            "none: the webhook deliverer and commands refuse to start; export parts on the "
            "filesystem get no link",
            ("webhook-deliverer", "webhooks commands", "api", "exporter", "dev"),
        ),
        Variable(
            "UJOBS_SECRET_KEY_FILE",
            "a file holding UJOBS_SECRET_KEY's value (compose's keygen service writes one on "
            "first start: `ujobs webhooks new-key --into PATH`); set one of the two",
            "none: UJOBS_SECRET_KEY is read",
            ("webhook-deliverer", "webhooks commands", "api", "exporter", "dev"),
        ),
        Variable(
            "UJOBS_WEBHOOK_ALLOW_PRIVATE",
            "networks webhooks may reach besides public addresses (10.0.0.0/8,…), or * for all; "
            "checked where an endpoint is registered (the api, ujobs dev, `ujobs webhooks "
            "endpoints add`) and at every delivery (the deliverer): set it on both",
            "none: loopback, private, link-local, multicast and metadata addresses refused",
            ("webhook-deliverer", "webhooks commands", "api", "dev"),
        ),
        Variable(
            "UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY",
            "deliveries to one webhook endpoint in flight fleet-wide; 0: no cap (a driver "
            "without leases, like redis)",
            "8",
            ("webhook-deliverer",),
        ),
        Variable(
            "UJOBS_WEBHOOK_ALLOW_HTTP",
            "1 lets webhook endpoints use http:// (tests, private networks, a receiver on "
            "127.0.0.1 with UJOBS_WEBHOOK_ALLOW_PRIVATE); checked at registration (the api, "
            "ujobs dev, `ujobs webhooks endpoints add`) and at every delivery: set it on both",
            "0: https:// only",
            ("webhook-deliverer", "webhooks commands", "api", "dev"),
        ),
    )
}
