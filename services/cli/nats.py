"""``ujobs nats status``: the edge's streams (limits and state), the api's consumer (its
backlog) and the settlements outbox (rows waiting for the relay), as a table or ``--json``.

Reads ``NATS_URL`` and ``UJOBS_NATS_PREFIX`` (``--prefix``); with ``DATABASE_URL`` set it also
counts the pending settlements, or with ``UJOBS_DRIVER=redis`` and ``REDIS_URL`` the entries of
the Redis driver's settlements stream. A stream not created yet prints as missing (the api creates
both at start).
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Any

import typer

from ujobs.drivers.postgres.sql import query
from ujobs.services.cli.common import JsonOption
from ujobs.services.config.settings import NatsStatusConfig, environment
from ujobs.services.nats.names import NatsNames
from ujobs.services.runtime.backends import open_pool, open_redis
from ujobs.services.runtime.output import Progress, emit_json, note, print_table, reported

_PENDING = query("settlements_pending")

nats_app = typer.Typer(help="The NATS edge: streams, consumer, settlements.", no_args_is_help=True)


async def _status(config: NatsStatusConfig) -> dict[str, Any]:
    # The NATS client (and the aiohttp it brings) is loaded by this command alone, not by
    # every ``ujobs`` command that starts.
    from ujobs.services.nats.service import connect
    from ujobs.services.nats.streams import stream_status

    names = NatsNames(config.prefix)
    nc = await connect(config.nats_url, name=f"{names.prefix}-cli")
    try:
        doc = await stream_status(nc.jetstream(), names)
    finally:
        await nc.close()
    doc["settlements"] = None
    connections = config.common.connections
    database_url = connections.database_url
    if connections.driver == "redis" and connections.redis_url is not None:
        from ujobs.drivers.redis.settlements import RedisSettlementsOutbox

        redis = open_redis(connections.redis_url)
        try:
            outbox = RedisSettlementsOutbox(redis, connections.redis_prefix)
            pending, oldest = await outbox.pending()
        finally:
            await redis.aclose()
        doc["settlements"] = {"pending": pending, "oldestPendingAtMs": oldest}
    elif database_url is not None:
        pool = await open_pool(database_url, max_size=1, generic_plans=False)
        try:
            row = await pool.fetchrow(_PENDING)
        finally:
            await pool.close()
        assert row is not None
        doc["settlements"] = {"pending": row["pending"], "oldestPendingAtMs": row["oldest_ms"]}
    return doc


@nats_app.command("status")
def status_command(
    prefix: Annotated[
        str | None, typer.Option("--prefix", help="subject prefix [default: UJOBS_NATS_PREFIX]")
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """The streams' limits and state, the api's consumer and the settlements outbox."""
    with reported(as_json=as_json):
        config = NatsStatusConfig.load(environment(), prefix=prefix)
        with Progress("reading the NATS edge"):
            doc = asyncio.run(_status(config))
    if as_json:
        emit_json(doc)
        return
    rows = []
    for name, s in doc["streams"].items():
        if s is None:
            rows.append((name, "(missing: ujobs api creates it)", *([None] * 6)))
            continue
        rows.append(
            (
                name,
                ",".join(s["subjects"]),
                s["retention"],
                f"{s['maxAgeS']:g}s",
                s["maxBytes"],
                f"{s['duplicateWindowS']:g}s",
                s["messages"],
                s["bytes"],
            )
        )
    print_table(
        ("STREAM", "SUBJECTS", "RETENTION", "MAX AGE", "MAX BYTES", "DUP WINDOW", "MSGS", "BYTES"),
        rows,
    )
    typer.echo(f"\nrequest/reply on {', '.join(doc['requestSubjects'])}; {doc['subjectsNote']}")
    c = doc["consumer"]
    if c is None:
        note("consumer: missing (ujobs api creates it)")
    else:
        typer.echo(
            f"\nconsumer {c['name']} on {c['stream']}: {c['pending']} pending, "
            f"{c['ackPending']} awaiting ack, {c['redelivered']} redelivered "
            f"(ack wait {c['ackWaitS']:g}s, max ack pending {c['maxAckPending']})"
        )
    st = doc["settlements"]
    if st is None:
        note(
            "settlements: set DATABASE_URL (or UJOBS_DRIVER=redis and REDIS_URL) to count "
            "the outbox"
        )
    else:
        typer.echo(f"settlements waiting for the relay: {st['pending']}")


__all__ = ["nats_app"]
