"""``ujobs``: every service and every operator command, one entry point (typer).

This module is the root: it registers the sub-apps (``cli.jobs``, ``cli.queues``, ``cli.db``,
the services) and holds ``manifest``. How a command prints, fails and shows progress is
``runtime.output``; how it reaches the backend is ``cli.common``.

Errors print their ``X_…`` code and a sentence of what to do, and exit non-zero (1; 70 for an
unexpected failure, whose detail ``ujobs --debug …`` shows); ``--json`` prints machine-readable
output on every command.
"""

from __future__ import annotations

import os
from importlib.metadata import version as package_version
from typing import Annotated

import typer

from ujobs.services.cli.common import AppOption, JsonOption
from ujobs.services.cli.db import db_app
from ujobs.services.cli.exports import exports_app
from ujobs.services.cli.jobs import jobs_app
from ujobs.services.cli.nats import nats_app
from ujobs.services.cli.queues import queues_app, workers_command
from ujobs.services.cli.services import (
    api_command,
    dev_command,
    exporter_command,
    reads,
    relay_command,
    scheduler_command,
    webhook_deliverer_command,
    worker_command,
)
from ujobs.services.cli.tasks import tasks_app
from ujobs.services.cli.tenants import tenants_app
from ujobs.services.cli.tokens import tokens_app
from ujobs.services.cli.webhooks import webhooks_app
from ujobs.services.config.settings import environment
from ujobs.services.runtime.app_loader import load_api
from ujobs.services.runtime.output import emit_json, reported, set_debug

app = typer.Typer(
    name="ujobs",
    help="ultimate-jobs: durable background work. Every command takes --json.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ujobs {package_version('ultimate-jobs')}")
        raise typer.Exit()


@app.callback()
def root(
    debug: Annotated[
        bool, typer.Option("--debug", help="show the full detail of an unexpected error")
    ] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", help="print the installed version", callback=_print_version, is_eager=True
        ),
    ] = False,
) -> None:
    """ultimate-jobs: durable background work. Every command takes --json."""
    # A callback also keeps typer in group mode whatever the number of commands.
    set_debug(debug)


@app.command()
def manifest(app_spec: AppOption = None, as_json: JsonOption = False) -> None:
    """Print every job and task descriptor (with each job's input JSON Schema) as JSON.

    The manifest is always JSON; --json also prints a failure as JSON on stdout.
    """
    with reported(as_json=as_json):
        spec = app_spec if app_spec is not None else environment().get("UJOBS_APP") or None
        document = load_api(spec).manifest()
    emit_json(document)


app.add_typer(jobs_app, name="jobs")
app.add_typer(queues_app, name="queues")
app.add_typer(tasks_app, name="tasks")
app.add_typer(tokens_app, name="tokens")
app.add_typer(tenants_app, name="tenants")
app.command("workers")(workers_command)
app.add_typer(db_app, name="db")
app.add_typer(nats_app, name="nats")
app.add_typer(exports_app, name="exports")
app.add_typer(webhooks_app, name="webhooks")
app.command("api", epilog=reads("api"))(api_command)
app.command("scheduler", epilog=reads("scheduler"))(scheduler_command)
app.command("dev", epilog=reads("dev"))(dev_command)
app.command("worker", epilog=reads("worker"))(worker_command)
app.command("relay", epilog=reads("relay"))(relay_command)
app.command("webhook-deliverer", epilog=reads("webhook-deliverer"))(webhook_deliverer_command)
app.command("exporter", epilog=reads("exporter"))(exporter_command)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()


if __name__ == "__main__":
    main()
