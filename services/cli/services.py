"""The service commands (``ujobs api``, ``worker``, ``relay``, ``scheduler``, the pinned workers,
``dev``): build the config, then ``run_service``.

Each command builds its service's frozen config from the environment, flags overriding, and
fails at once with the variable's name when a value is bad (``--json``: the error as JSON on
stdout; the service's own output is JSON log lines either way); then it runs until SIGTERM has
drained it and exits 0 (1 when a role abandoned work at the deadline).
"""

from __future__ import annotations

from typing import Annotated

import typer

from ujobs.services.cli.common import AppOption, JsonOption
from ujobs.services.config.settings import (
    ApiConfig,
    RelayConfig,
    SchedulerConfig,
    WorkerConfig,
    environment,
)
from ujobs.services.config.variables import VARIABLES
from ujobs.services.runtime.output import reported
from ujobs.services.runtime.service_run import ServiceRun, run_service


def reads(service: str) -> str:
    """The ``--help`` epilog of a service: every variable it reads (the configuration page)."""
    names = [name for name, v in VARIABLES.items() if service in v.services]
    return (
        f"Reads {', '.join(names)} (docs/reference/configuration.md; a flag overrides its "
        "variable)."
    )


def api_command(
    app_spec: AppOption = None,
    host: Annotated[
        str | None, typer.Option(help="listen address [default: UJOBS_API_HOST, 127.0.0.1]")
    ] = None,
    port: Annotated[
        int | None, typer.Option(help="port; 0 picks a free one [default: UJOBS_API_PORT, 8080]")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run the api: enqueue, events and the operator surface over HTTP (bearer tokens from
    `ujobs tokens create`), plus /healthz, /readyz, /metrics, /v1/manifest, /v1/openapi.json."""
    with reported(as_json=as_json):
        config = ApiConfig.load(environment(), app=app_spec, host=host, port=port)

    async def start(run: ServiceRun) -> None:
        from ujobs.services.api.app import start_api  # aiohttp's server side only where it serves

        await start_api(run, config)

    run_service(config.common, start, as_json=as_json)


def scheduler_command(app_spec: AppOption = None, as_json: JsonOption = False) -> None:
    """Run the scheduler: fire the app's tasks, one leader at a time (Postgres)."""
    with reported(as_json=as_json):
        config = SchedulerConfig.load(environment(), app=app_spec)

    async def start(run: ServiceRun) -> None:
        from ujobs.services.scheduler import start_scheduler

        await start_scheduler(run, config)

    run_service(config.common, start, as_json=as_json)


def dev_command(
    app_spec: AppOption = None,
    example: Annotated[
        bool,
        typer.Option("--example", help="load ujobs.services.example_app and enqueue onboard_org"),
    ] = False,
    port: Annotated[
        int | None, typer.Option(help="the api's port; 0 picks a free one [default: 8080]")
    ] = None,
    queues: Annotated[
        str | None,
        typer.Option(help="queues to serve [default: every queue the app's jobs name]"),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Run every service in this process; with no DATABASE_URL, on an embedded Postgres."""
    from ujobs.services.dev.start import DevConfig

    with reported(as_json=as_json):
        config = DevConfig.load(app=app_spec, example=example, port=port, queues=queues)

    async def start(run: ServiceRun) -> None:
        from ujobs.services.dev.start import start_dev

        await start_dev(run, config)

    run_service(config.worker.common, start, as_json=as_json)


QueuesOption = Annotated[
    str | None,
    typer.Option(
        "--queues",
        help="comma-separated queues [default: UJOBS_QUEUES, else every queue the app's jobs name]",
    ),
]
DriverOption = Annotated[
    str | None,
    typer.Option(
        "--driver", help="postgres or redis [default: UJOBS_DRIVER, postgres]", show_default=False
    ),
]


def _run_worker(config: WorkerConfig, *, as_json: bool) -> None:
    async def start(run: ServiceRun) -> None:
        from ujobs.services.worker import start_worker

        await start_worker(run, config)

    run_service(config.common, start, as_json=as_json)


def worker_command(
    app_spec: AppOption = None,
    queues: QueuesOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Run a worker: the app's jobs of these queues, until SIGTERM has drained it."""
    with reported(as_json=as_json):
        config = WorkerConfig.load(environment(), queues=queues, app=app_spec, driver=driver)
    _run_worker(config, as_json=as_json)


def webhook_deliverer_command(
    app_spec: AppOption = None, driver: DriverOption = None, as_json: JsonOption = False
) -> None:
    """Run a worker pinned to the webhooks queue (outbound webhook deliveries)."""
    from ujobs.services.webhook_deliverer import (
        start_webhook_deliverer,
        webhook_deliverer_config,
        webhook_settings,
    )

    with reported(as_json=as_json):
        env = environment()
        config = webhook_deliverer_config(env, app=app_spec, driver=driver)
        settings = webhook_settings(env)

    async def start(run: ServiceRun) -> None:
        await start_webhook_deliverer(run, config, settings)

    run_service(config.common, start, as_json=as_json)


def exporter_command(
    app_spec: AppOption = None, driver: DriverOption = None, as_json: JsonOption = False
) -> None:
    """Run a worker pinned to the exports queue (large dataset exports)."""
    from ujobs.services.exporter import exporter_config

    with reported(as_json=as_json):
        config = exporter_config(environment(), app=app_spec, driver=driver)
    _run_worker(config, as_json=as_json)


def relay_command(app_spec: AppOption = None, as_json: JsonOption = False) -> None:
    """Run the outbox relay: publish committed x_outbox rows onto the queue."""
    with reported(as_json=as_json):
        config = RelayConfig.load(environment(), app=app_spec)

    async def start(run: ServiceRun) -> None:
        from ujobs.services.relay import start_relay

        await start_relay(run, config)

    run_service(config.common, start, as_json=as_json)
