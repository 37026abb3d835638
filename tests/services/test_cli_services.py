"""Every ``ujobs`` command takes ``--json``; every service refuses a bad value at start, naming
the variable, before it opens anything."""

from __future__ import annotations

from typing import Any

import pytest
import typer.main

from tests.support.cli import json_of, ujobs
from ujobs.services.cli.app import app


def leaves(command: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], Any]]:
    if hasattr(command, "commands"):
        return [
            leaf
            for name, sub in sorted(command.commands.items())
            for leaf in leaves(sub, (*path, name))
        ]
    return [(path, command)]


def test_every_command_takes_json() -> None:
    commands = leaves(typer.main.get_command(app))
    assert len(commands) >= 20
    for path, command in commands:
        options = {opt for param in command.params for opt in param.opts}
        assert "--json" in options, path


@pytest.mark.parametrize(
    ("command", "env", "says"),
    [
        (("worker",), {"UJOBS_CONCURRENCY": "lots"}, "UJOBS_CONCURRENCY: 'lots'"),
        (("worker", "--queues", "a b"), {}, "--queues / UJOBS_QUEUES: 'a b'"),
        (("webhook-deliverer",), {"UJOBS_MAX_IN_FLIGHT": "0"}, "UJOBS_MAX_IN_FLIGHT: 0"),
        (("exporter", "--driver", "mysql"), {}, "--driver / UJOBS_DRIVER: 'mysql'"),
        (("relay",), {"UJOBS_OUTBOX_BATCH_SIZE": "-5"}, "UJOBS_OUTBOX_BATCH_SIZE: '-5'"),
        (("scheduler",), {"UJOBS_SCHEDULER_TICK_INTERVAL_MS": "1"}, "TICK_INTERVAL_MS: 1 is"),
        (("api",), {"UJOBS_API_PORT": "http"}, "UJOBS_API_PORT: 'http'"),
        (("dev",), {"UJOBS_LOG_LEVEL": "loud"}, "UJOBS_LOG_LEVEL: 'loud'"),
    ],
)
def test_a_service_refuses_a_bad_value_at_start(
    command: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    result = ujobs(*command, dsn="postgresql://nobody@127.0.0.1:1/none", env=env)
    assert result.exit_code == 1
    assert result.stderr.startswith("X_CONFIG_INVALID: ")
    assert says in result.stderr
    as_json = ujobs(*command, "--json", dsn="postgresql://nobody@127.0.0.1:1/none", env=env)
    assert json_of(as_json)["error"]["code"] == "X_CONFIG_INVALID"


def test_a_service_without_its_database_names_the_variable() -> None:
    for command in ("worker", "relay", "scheduler", "api"):
        result = ujobs(command)
        assert result.exit_code == 1
        assert result.stderr.startswith("X_DRIVER_UNAVAILABLE: DATABASE_URL: "), command
