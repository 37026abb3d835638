"""``ujobs dev``: every service in one process, for a first run on a bare machine.

With no ``DATABASE_URL`` it starts a private Postgres under ``./.ujobs/pg`` (``pgserver``,
Unix socket only, kept between runs) and applies the schema; without ``REDIS_URL`` the wake
uses Postgres LISTEN/NOTIFY. Then it runs the worker (every queue the app's jobs name), the
scheduler, the outbox relay and the api in this one process, prints where everything is and
how to enqueue, and narrates each job's state changes on stdout (``dev.watch``). It enqueues
nothing by itself — except with ``--example``, which loads ``ujobs.services.example_app`` and
enqueues its ``onboard_org`` so the first minute shows a step replay, a sleep resume and a
task fire. Ctrl-C (or SIGTERM) drains everything, says so, and exits 0.

Exports (``export_rows()`` without ``sink=``) go where ``UJOBS_EXPORT_URL`` says, as in the
exporter, or to ``./.ujobs/exports`` beside the embedded database; the banner prints which. The
store is set before the worker takes its first job, so no export lands anywhere else.

The terminal is for the story: unless ``UJOBS_LOG_LEVEL`` is set, the JSON log lines (warnings
up, tracebacks included) go to ``./.ujobs/dev.log``, and only errors reach stderr — as one JSON
line without the traceback.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from ujobs.drivers.base import DEFAULT_QUEUE
from ujobs.exports.sinks import DEFAULT_EXPORT_ROOT, set_default_sink, sink_from_url
from ujobs.introspect import introspection_of
from ujobs.jobs.registry import Registry
from ujobs.lifecycle import register_shutdown_hooks
from ujobs.services.cli.db import migrate_url
from ujobs.services.config.settings import (
    ApiConfig,
    Connections,
    RelayConfig,
    SchedulerConfig,
    WorkerConfig,
    environment,
)
from ujobs.services.dev.embedded import start_embedded_postgres
from ujobs.services.dev.watch import DevWatch
from ujobs.services.exporter import ExportSettings
from ujobs.services.redact import redact_url
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.logging import JsonLineFormatter, configure_logging, log_to_file
from ujobs.services.runtime.service_run import ServiceRun

C = TypeVar("C", WorkerConfig, ApiConfig, SchedulerConfig, RelayConfig)
EXAMPLE_APP = "ujobs.services.example_app:api"
DATA_DIR = Path(".ujobs") / "pg"
LOG_FILE = Path(".ujobs") / "dev.log"


def say(line: str) -> None:
    sys.stdout.write(f"ujobs dev: {line}\n")
    sys.stdout.flush()


@dataclass(frozen=True, slots=True)
class DevConfig:
    """The three services' configs from one environment, and what ``dev`` adds."""

    worker: WorkerConfig
    api: ApiConfig
    scheduler: SchedulerConfig
    relay: RelayConfig
    example: bool
    data_dir: Path
    queues_given: bool
    quiet: bool = False
    """UJOBS_LOG_LEVEL unset: the JSON log goes to ``LOG_FILE``, the terminal tells the story."""
    exports: ExportSettings = dataclasses.field(default_factory=ExportSettings)

    @property
    def connections(self) -> Connections:
        return self.worker.common.connections

    @classmethod
    def load(
        cls, *, app: str | None, example: bool, port: int | None, queues: str | None
    ) -> DevConfig:
        env = environment()
        chosen_app = app if app is not None else (EXAMPLE_APP if example else None)
        worker = WorkerConfig.load(
            env, service="dev", app=chosen_app, queues=queues, require_backend=False
        )
        if "UJOBS_LOG_LEVEL" not in env:
            # The terminal is for the narration; JSON lines only for what went wrong.
            quiet = dataclasses.replace(worker.common, log_level="warning")
            worker = dataclasses.replace(worker, common=quiet)
        api = ApiConfig.load(env, service="dev", app=chosen_app, port=port, require_backend=False)
        scheduler = SchedulerConfig.load(env, service="dev", app=chosen_app, require_backend=False)
        relay = RelayConfig.load(env, service="dev", app=chosen_app, require_backend=False)
        return cls(
            worker=worker,
            api=api,
            scheduler=scheduler,
            relay=relay,
            example=example,
            data_dir=DATA_DIR,
            queues_given=queues is not None or "UJOBS_QUEUES" in env,
            quiet="UJOBS_LOG_LEVEL" not in env,
            exports=ExportSettings.load(env),
        )

    def on(self, connections: Connections) -> DevConfig:
        """The same configs pointed at ``connections`` (the embedded database, once up)."""

        def moved(config: C) -> C:
            common = dataclasses.replace(config.common, connections=connections)
            return dataclasses.replace(config, common=common)

        return dataclasses.replace(
            self,
            worker=moved(self.worker),
            api=moved(self.api),
            scheduler=moved(self.scheduler),
            relay=moved(self.relay),
        )


def served_queues(config: DevConfig, registry: Registry) -> tuple[str, ...]:
    """UJOBS_QUEUES / --queues when given; else every queue a job names, plus ``default``."""
    if config.queues_given:
        return config.worker.queues
    named = {handle.queue for handle in registry.jobs.values()} | {DEFAULT_QUEUE}
    return tuple(sorted(named))


async def _database(run: ServiceRun, config: DevConfig) -> DevConfig:
    if config.connections.database_url is not None:
        say(f"Postgres at {redact_url(config.connections.database_url)} (DATABASE_URL)")
        return config
    say(f"no DATABASE_URL: starting an embedded Postgres in ./{config.data_dir} …")
    embedded = await asyncio.to_thread(start_embedded_postgres, config.data_dir)
    run.stack.callback(embedded.stop)
    say(f"Postgres is up (Unix socket only): {embedded.url}")
    return config.on(dataclasses.replace(config.connections, database_url=embedded.url))


async def start_dev(run: ServiceRun, config: DevConfig) -> None:
    """Bring up the database, the schema and every role; narrate until drained."""
    from ujobs.services.api.app import address, start_api
    from ujobs.services.relay import start_relay
    from ujobs.services.runtime.wiring import wire
    from ujobs.services.scheduler import start_scheduler
    from ujobs.services.worker import start_worker

    started = False

    def stopped() -> None:
        if started:
            say("drained and stopped: every job it held finished or went back to the queue")

    run.stack.callback(stopped)  # the first pushed: it runs after everything else has closed
    if config.quiet:
        _story_logging(run)
    config = await _database(run, config)
    url = config.connections.require_database("ujobs dev")
    applied = await migrate_url(url)
    say(f"schema: applied {', '.join(applied)}" if applied else "schema: up to date")
    registry = load_api(config.worker.common.app)
    wired = await wire(run, config.connections, listen=True, need_database=True)
    watch = DevWatch(introspection_of(wired.driver))
    await watch.prime()
    watch.start()
    run.stack.push_async_callback(watch.stop)

    queues = served_queues(config, registry)
    await start_scheduler(run, config.scheduler, wired=wired)
    await start_relay(run, config.relay, wired=wired, say=False)
    worker = dataclasses.replace(config.worker, queues=queues, queues_given=True)
    exports = install_export_store(config.exports)
    await start_worker(run, worker, registry=registry, wired=wired)
    runner = await start_api(run, config.api)
    _banner(config, registry, queues, url, [f"http://{address(a)}" for a in runner.addresses])
    say(exports)
    run.stack.callback(
        register_shutdown_hooks(
            accept=lambda: say("stopping: no new work; draining what is running …"),
            name="dev-story",
        )
    )
    started = True
    if config.example:
        from ujobs.services.example_app import onboard_org

        queued = await onboard_org.enqueue({"org_id": "acme"})
        say(f"--example: enqueued onboard_org {queued.id} — watch it below")


def install_export_store(settings: ExportSettings) -> str:
    """Make ``UJOBS_EXPORT_URL`` (or ``./.ujobs/exports``) where this process's exports go;
    answers the banner's line saying which."""
    if settings.url is not None:
        set_default_sink(sink_from_url(settings.url))
        return f"exports: {redact_url(settings.url)} (UJOBS_EXPORT_URL)"
    set_default_sink(sink_from_url(str(DEFAULT_EXPORT_ROOT)))
    return f"exports: ./{DEFAULT_EXPORT_ROOT} (set UJOBS_EXPORT_URL to store them elsewhere)"


def _story_logging(run: ServiceRun) -> None:
    """JSON lines (tracebacks included) to ``LOG_FILE``; only errors on stderr, one line each."""
    stderr = configure_logging("dev", logging.WARNING)
    stderr.setFormatter(JsonLineFormatter("dev", tracebacks=False))
    stderr.setLevel(logging.ERROR)
    logfile = log_to_file("dev", LOG_FILE, logging.WARNING)

    def restore() -> None:
        logging.getLogger().removeHandler(logfile)
        logfile.close()
        stderr.setFormatter(JsonLineFormatter("dev"))
        stderr.setLevel(logging.NOTSET)

    run.stack.callback(restore)


def _banner(
    config: DevConfig, registry: Registry, queues: tuple[str, ...], url: str, api: list[str]
) -> None:
    say(f"app: {config.worker.common.app or '(none: set --app or UJOBS_APP)'}")
    say(f"jobs: {', '.join(sorted(registry.jobs)) or '-'}")
    say(f"tasks: {', '.join(sorted(registry.tasks)) or '-'}")
    say(f"worker: queues {', '.join(queues)}; api: {', '.join(api)}")
    say("in another terminal:")
    say(f"  export DATABASE_URL='{redact_url(url)}'")
    say("  ujobs jobs list            # what is queued, running, done")
    say("  ujobs jobs show <id>       # one job: steps, attempts, last error")
    say("enqueue from your code (docs/getting-started.md): await my_job.enqueue({...})")
    if config.quiet:
        say(f"logs: ./{LOG_FILE} (JSON lines, tracebacks included; errors also on stderr)")
    say("Ctrl-C drains and stops everything")
