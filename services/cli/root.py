"""The ``ujobs`` root: its options, the table of its commands, and the entry point that loads
only the command it runs.

Every command's module pulls in the parts of the library it drives (a driver, the api's
client, the webhook store), so importing all of them costs every invocation the whole CLI's
start-up. ``main`` reads which command the arguments name and builds a root holding that one
command, from the same objects the full root (``build()``, ``ujobs.services.cli.app``)
registers, so its options, help and behaviour are those of the full CLI. Anything else (no
command, ``--help``, ``--version``, a name that is not a command) goes through the full root,
whose listing and "No such command" answer need every command.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from importlib.metadata import version as package_version
from typing import Annotated, Any

import typer


@dataclass(frozen=True, slots=True)
class Command:
    """Where one root command lives: ``module.attribute`` is a sub-app (``group``) or a command
    function; ``service`` commands carry the variables they read as their help's epilog."""

    module: str
    attribute: str
    group: bool = False
    service: bool = False


_CLI = "ujobs.services.cli"

COMMANDS: dict[str, Command] = {
    "manifest": Command(f"{_CLI}.manifest", "manifest_command"),
    "jobs": Command(f"{_CLI}.jobs", "jobs_app", group=True),
    "queues": Command(f"{_CLI}.queues", "queues_app", group=True),
    "tasks": Command(f"{_CLI}.tasks", "tasks_app", group=True),
    "tokens": Command(f"{_CLI}.tokens", "tokens_app", group=True),
    "tenants": Command(f"{_CLI}.tenants", "tenants_app", group=True),
    "workers": Command(f"{_CLI}.queues", "workers_command"),
    "db": Command(f"{_CLI}.db", "db_app", group=True),
    "nats": Command(f"{_CLI}.nats", "nats_app", group=True),
    "exports": Command(f"{_CLI}.exports", "exports_app", group=True),
    "webhooks": Command(f"{_CLI}.webhooks", "webhooks_app", group=True),
    "api": Command(f"{_CLI}.services", "api_command", service=True),
    "scheduler": Command(f"{_CLI}.services", "scheduler_command", service=True),
    "dev": Command(f"{_CLI}.services", "dev_command", service=True),
    "worker": Command(f"{_CLI}.services", "worker_command", service=True),
    "relay": Command(f"{_CLI}.services", "relay_command", service=True),
    "webhook-deliverer": Command(f"{_CLI}.services", "webhook_deliverer_command", service=True),
    "exporter": Command(f"{_CLI}.services", "exporter_command", service=True),
}
"""Every root command, registered in this order (``ujobs --help`` lists the plain commands
before the groups)."""

_FLAGS = frozenset({"--debug"})
"""The root's options that take no value: the command named after them is still the command."""


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"ujobs {package_version('ultimate-jobs')}")
        raise typer.Exit()


def _root(
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
    from ujobs.services.runtime.output import set_debug

    set_debug(debug)


def build(names: Collection[str] | None = None) -> typer.Typer:
    """The root with every command (``names`` None) or only those named, each imported from
    its own module here."""
    app = typer.Typer(
        name="ujobs",
        help="ultimate-jobs: durable background work. Every command takes --json.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        add_completion=False,
    )
    app.callback()(_root)
    for name, command in COMMANDS.items():
        if names is not None and name not in names:
            continue
        target: Any = getattr(importlib.import_module(command.module), command.attribute)
        if command.group:
            app.add_typer(target, name=name)
        elif command.service:
            from ujobs.services.cli.services import reads

            app.command(name, epilog=reads(name))(target)
        else:
            app.command(name)(target)
    return app


def commands_needed(args: Sequence[str]) -> tuple[str, ...] | None:
    """The root commands a run with ``args`` (the arguments after ``ujobs``) needs: the one it
    names, none for ``--version`` (answered by the root's own option), every one (None) for
    anything else: no command, ``--help``, a name that is not a command."""
    for arg in args:
        if arg in _FLAGS:
            continue
        if arg == "--version":
            return ()
        return (arg,) if arg in COMMANDS else None
    return None


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    build(commands_needed(sys.argv[1:]))()
