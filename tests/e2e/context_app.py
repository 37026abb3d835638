"""An app that owns resources through ``define_api(context=)``, as the process tests load it
(``UJOBS_APP=tests.e2e.context_app:api``).

The factory opens its own pool on ``DATABASE_URL`` and writes ``opened`` (with a token minted
per entry) to ``ctx_log``; each run of a ``uses_ctx.<queue>`` job writes ``ran:<n>`` with the
token of the ``run.ctx`` it was handed; the exit writes ``closed``. So a test reads from one
table how often the context was entered, what every run saw, and that it closed after them. With
``CONTEXT_APP_FAIL`` set the factory raises before it yields (the app's database is down).
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import asyncpg

from ujobs import Run, define_api, job, t

QUEUE = "ctx"
CTX_LOG = "create table ctx_log (seq bigserial primary key, event text not null, token text)"


@dataclass(frozen=True)
class Resources:
    pool: asyncpg.Pool[Any]
    token: str


@contextlib.asynccontextmanager
async def resources() -> AsyncIterator[Resources]:
    if os.environ.get("CONTEXT_APP_FAIL"):
        raise ConnectionRefusedError("the app's database refused the connection")
    pool = await asyncpg.create_pool(os.environ["DATABASE_URL"], min_size=1, max_size=2)
    token = uuid.uuid4().hex
    await pool.execute("insert into ctx_log (event, token) values ('opened', $1)", token)
    try:
        yield Resources(pool=pool, token=token)
    finally:
        await pool.execute("insert into ctx_log (event, token) values ('closed', $1)", token)
        await pool.close()


async def _log_run(run: Run[Any]) -> None:
    ctx: Resources = run.ctx
    await ctx.pool.execute(
        "insert into ctx_log (event, token) values ($1, $2)", f"ran:{run.input.n}", ctx.token
    )


def _logging_job(queue: str) -> Any:
    return job(
        name=f"uses_ctx.{queue}",
        run=_log_run,
        input=t.object(n=t.number.int()),
        idempotency_key=lambda i: f"ctx:{i.n}",
        tenant="none",
        queue=queue,
    )


uses_ctx = _logging_job(QUEUE)
# The same body on the queues the pinned services serve: the exporter's, the deliverer's.
uses_ctx_exports = _logging_job("exports")
uses_ctx_webhooks = _logging_job("webhooks")


api = define_api(jobs=[sys.modules[__name__]], context=resources)
