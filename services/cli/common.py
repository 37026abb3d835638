"""What every operator command shares: its options and the one way it reaches the backend.

An operator command is ``operate(work, ...)``: build ``OperatorConfig`` from the environment
(a flag overriding its variable), open the driver, run ``work(backend, progress)`` under a
progress line, close everything, and turn any failure into its ``X_…`` code. The commands
themselves only read ``driver.introspect`` through ``ujobs.introspect``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, TypeVar

import click
import typer

from ujobs.services.cli.remote import Remote, remote_refused, remote_target
from ujobs.services.config.settings import OperatorConfig, environment
from ujobs.services.runtime.backends import Backend, open_backend
from ujobs.services.runtime.output import Progress, reported

T = TypeVar("T")

JsonOption = Annotated[bool, typer.Option("--json", help="print JSON instead of a table")]
DatabaseUrlOption = Annotated[
    str | None,
    typer.Option(
        "--database-url",
        help="postgresql://… of the queue [default: DATABASE_URL]",
        show_default=False,
    ),
]
DriverOption = Annotated[
    str | None,
    typer.Option(
        "--driver",
        help="postgres or redis [default: UJOBS_DRIVER, else postgres]",
        show_default=False,
    ),
]
AppOption = Annotated[
    str | None,
    typer.Option("--app", help="module:attribute of the define_api() value [default: UJOBS_APP]"),
]

Work = Callable[[Backend, Progress], Awaitable[T]]


def operate(
    work: Work[T],
    *,
    as_json: bool,
    label: str,
    database_url: str | None = None,
    driver: str | None = None,
    remote: Callable[[Remote], T] | None = None,
) -> T:
    """Run one operator command's ``work`` against the configured backend, or, for a command
    with a ``remote`` form, against the api at UJOBS_URL when DATABASE_URL is unset
    (``ujobs.services.cli.remote``)."""
    with reported(as_json=as_json):
        env = environment()
        if remote is None:
            refuse_remote(env, database_url=database_url, driver=driver)
        else:
            target = remote_target(env, database_url=database_url, driver=driver)
            if target is not None:
                with Progress(label):
                    return remote(target)
        config = OperatorConfig.load(env, database_url=database_url, driver=driver)
        with Progress(label) as progress:
            return asyncio.run(_run(config, work, progress))
    raise AssertionError("unreachable: reported() exits on every error")


def refuse_remote(env: dict[str, str], *, database_url: str | None, driver: str | None) -> None:
    """A command without a remote form, run with UJOBS_URL alone: ``X_CONFIG_INVALID`` naming
    DATABASE_URL (the command is the one click is running)."""
    ctx = click.get_current_context(silent=True)
    path = ctx.command_path.split(" ", 1)[-1] if ctx is not None else "this command"
    remote_refused(env, f"ujobs {path}", database_url=database_url, driver=driver)


async def _run(config: OperatorConfig, work: Work[T], progress: Progress) -> T:
    async with open_backend(config.common.connections, pool_size=2, generic_plans=False) as backend:
        return await work(backend, progress)
