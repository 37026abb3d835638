"""The ``ujobs`` entry point loads only the command it runs (``ujobs.services.cli.root``): the
command it builds is the full CLI's own, and a run names the right one."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import typer
from typer.testing import CliRunner

from ujobs.services.cli.app import app as full_app
from ujobs.services.cli.root import COMMANDS, build, commands_needed


def _commands(app: typer.Typer) -> dict[str, object]:
    return dict(getattr(typer.main.get_command(app), "commands", {}))


def _helps(app: typer.Typer, path: tuple[str, ...]) -> dict[tuple[str, ...], str]:
    """``--help`` of the command at ``path`` and of every command under it."""
    shown = CliRunner().invoke(app, [*path, "--help"], terminal_width=100)
    assert shown.exit_code == 0, shown.output
    helps = {path: shown.output}
    command = typer.main.get_command(app)
    for name in path:
        command = getattr(command, "commands", {})[name]
    for sub in getattr(command, "commands", {}):
        helps |= _helps(app, (*path, sub))
    return helps


def test_the_full_root_holds_exactly_the_tables_commands() -> None:
    assert set(_commands(full_app)) == set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_a_root_built_for_one_command_holds_the_full_clis_command(name: str) -> None:
    alone = build((name,))
    assert set(_commands(alone)) == {name}
    assert _helps(alone, (name,)) == _helps(full_app, (name,))


@pytest.mark.parametrize(
    ("args", "needed"),
    [
        (["jobs", "list", "--state", "dead"], ("jobs",)),
        (["--debug", "db", "migrate"], ("db",)),
        (["webhook-deliverer"], ("webhook-deliverer",)),
        (["--version"], ()),
        (["--debug", "--version"], ()),
        ([], None),
        (["--help"], None),
        (["bogus", "--help"], None),
        (["--json"], None),
    ],
)
def test_a_run_needs_the_command_it_names_and_the_root_options_need_none(
    args: list[str], needed: tuple[str, ...] | None
) -> None:
    assert commands_needed(args) == needed


PROBE = """
import json, sys
from ujobs.services.cli.root import build, commands_needed
build(commands_needed(["db", "migrate"]))
print(json.dumps(sorted(m for m in sys.modules if m.startswith("ujobs.services."))))
"""


def test_a_command_loads_its_own_module_and_not_the_others() -> None:
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    loaded = set(json.loads(out.stdout))
    assert "ujobs.services.cli.db" in loaded
    for other in ("jobs", "webhooks", "exports", "nats", "services", "tokens"):
        assert f"ujobs.services.cli.{other}" not in loaded


@pytest.mark.parametrize(
    ("args", "shown"),
    [
        (["db", "--help"], "The database schema."),
        (["--version"], "ujobs "),
        (["--help"], "Outbound webhooks"),
    ],
)
def test_the_module_entry_point_answers_as_the_console_script(args: list[str], shown: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "ujobs.services.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert shown in out.stdout
