"""``ujobs``: every service and every operator command, one entry point.

Errors print their ``X_…`` code and a sentence of what to do, and exit non-zero; ``--json``
prints machine-readable output on every command.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Annotated, Any

import asyncpg
import orjson
import typer

from services.app_loader import load_api
from services.relay import relay_command
from services.scheduler import scheduler_command, tasks_app
from shared.errors import DriverUnavailableError, UltimateError

app = typer.Typer(
    name="ujobs",
    help="ultimate-jobs: durable background work. Every command takes --json.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

AppOption = Annotated[
    str | None,
    typer.Option("--app", envvar="UJOBS_APP", help="module:attribute of the define_api() value"),
]
JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]


def emit_json(value: Any) -> None:
    sys.stdout.write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def fail(error: UltimateError, *, as_json: bool) -> None:
    """Print the error as its code and a sentence (or JSON) and exit 1."""
    if as_json:
        emit_json({"error": error.to_dict()})
    else:
        sys.stderr.write(f"{error.code}: {error.message}\n")
    raise typer.Exit(code=1)


@app.callback()
def root() -> None:
    """ultimate-jobs: durable background work. Every command takes --json."""
    # A callback keeps typer in group mode, so `ujobs manifest` is a subcommand even while it
    # is the only one (typer otherwise promotes a lone command to the whole program).


@app.command()
def manifest(app_spec: AppOption = None, as_json: JsonOption = False) -> None:
    """Print every job and task descriptor (with each job's input JSON Schema) as JSON.

    The manifest is always JSON; --json also prints a failure as JSON on stdout.
    """
    try:
        reg = load_api(app_spec)
        document = reg.manifest()
    except UltimateError as exc:
        fail(exc, as_json=as_json)
        return
    emit_json(document)


app.command("scheduler")(scheduler_command)
app.command("relay")(relay_command)
app.add_typer(tasks_app, name="tasks")

db_app = typer.Typer(help="The database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

DatabaseUrlOption = Annotated[
    str | None,
    typer.Option("--database-url", envvar="DATABASE_URL", help="postgresql://… to migrate"),
]


@db_app.command("migrate")
def db_migrate(database_url: DatabaseUrlOption = None, as_json: JsonOption = False) -> None:
    """Apply every pending migration in sql/migrations, in order; a no-op when none is."""
    if not database_url:
        fail(
            DriverUnavailableError(
                "no database to migrate: pass --database-url or set DATABASE_URL"
            ),
            as_json=as_json,
        )
        return
    try:
        applied = asyncio.run(_migrate(database_url))
    except (OSError, asyncpg.PostgresError) as exc:
        fail(
            DriverUnavailableError(f"could not migrate: {exc}", meta={"cause": type(exc).__name__}),
            as_json=as_json,
        )
        return
    if as_json:
        emit_json({"applied": applied})
    elif applied:
        sys.stdout.write("".join(f"applied {name}\n" for name in applied))
    else:
        sys.stdout.write("up to date: nothing to apply\n")


async def _migrate(database_url: str) -> list[str]:
    from shared.migrate import migrate

    conn = await asyncpg.connect(database_url)
    try:
        return await migrate(conn)
    finally:
        await conn.close()


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()


if __name__ == "__main__":
    main()
