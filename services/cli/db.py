"""``ujobs db migrate``: apply the schema (``ujobs.drivers.postgres.migrate``), idempotent and
ordered.

Every other service applies nothing to the schema on its own; compose runs this once, as the
``migrate`` service the others wait on.
"""

from __future__ import annotations

import asyncio

import asyncpg
import typer

from ujobs.services.cli.backfill import backfill_command
from ujobs.services.cli.common import DatabaseUrlOption, JsonOption
from ujobs.services.cli.retention import purge_command
from ujobs.services.config.settings import environment, read_common
from ujobs.services.runtime.output import Progress, emit_json, reported

db_app = typer.Typer(help="The database schema.", no_args_is_help=True)


@db_app.command("migrate")
def db_migrate(database_url: DatabaseUrlOption = None, as_json: JsonOption = False) -> None:
    """Apply every pending migration in sql/migrations, in order; a no-op when none is."""
    with reported(as_json=as_json):
        common = read_common(environment(), "db migrate", database_url=database_url)
        url = common.connections.require_database("ujobs db migrate")
        with Progress("migrating (waiting for the migration lock if another migrate holds it)"):
            applied = asyncio.run(migrate_url(url))
    if as_json:
        emit_json({"applied": applied})
    elif applied:
        typer.echo("".join(f"applied {name}\n" for name in applied), nl=False)
    else:
        typer.echo("up to date: nothing to apply")


async def migrate_url(database_url: str) -> list[str]:
    """Apply pending migrations over one connection; answers the ids applied."""
    from ujobs.drivers.postgres.migrate import migrate

    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        return await migrate(conn)
    finally:
        await conn.close()


db_app.command("purge")(purge_command)
db_app.command("backfill")(backfill_command)
