"""The NATS edge of ``ujobs api``: connect, then run what the api owns on NATS.

``nats_edge(url, edge, names, pool=...)`` is an async context manager the api enters when
``NATS_URL`` is set: it connects (reconnecting for ever once connected: NATS down only delays
the edge), creates or updates the streams and the api's consumer (``streams``), starts the
request/reply responder, the enqueue stream's consumer and the settlements relay (over
``x_settlements`` with Postgres, over the Redis driver's ``redis_outbox`` stream on a Redis
deployment), and on the way out stops them and drains the connection, so every request and message
in hand is answered (or acked) before the process exits.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import nats
from nats.aio.client import Client

from ujobs.errors import DriverUnavailableError
from ujobs.services.nats.consumer import MAX_DELIVERIES, StreamConsumer
from ujobs.services.nats.edge import NatsEdge
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.requests import RequestResponder
from ujobs.services.nats.settlements import SettlementResults, SettlementsRelay
from ujobs.services.nats.settlements_redis import RedisSettlementsRelay
from ujobs.services.nats.streams import ACK_WAIT_S, MAX_ACK_PENDING, ensure_streams
from ujobs.services.redact import redact_url

if TYPE_CHECKING:
    import asyncpg

    from ujobs.drivers.redis.settlements import RedisSettlementsOutbox

    Pool = asyncpg.Pool[Any]

log = logging.getLogger("ujobs.nats")

CONNECT_TIMEOUT_S = 5.0
RECONNECT_WAIT_S = 0.5
FIRST_CONNECT_ATTEMPTS = 3


async def connect(url: str, *, name: str) -> Client:
    """A client that keeps reconnecting once connected; the first connect failing is
    ``X_DRIVER_UNAVAILABLE`` naming NATS_URL."""

    async def on_error(exc: Exception) -> None:
        log.warning("ujobs.nats.error", extra={"error": exc})

    try:
        # A bounded first connect (nats-py's connect loops for ever with -1), then for ever.
        nc = await nats.connect(
            url,
            name=name,
            connect_timeout=CONNECT_TIMEOUT_S,
            reconnect_time_wait=RECONNECT_WAIT_S,
            max_reconnect_attempts=FIRST_CONNECT_ATTEMPTS,
            allow_reconnect=True,
            error_cb=on_error,
        )
        nc.options["max_reconnect_attempts"] = -1
        return nc
    except Exception as exc:
        raise DriverUnavailableError(
            f"NATS_URL: cannot connect to {redact_url(url)} ({type(exc).__name__}: {exc}); "
            "start NATS (with JetStream: nats-server -js) or unset NATS_URL",
            meta={"variable": "NATS_URL"},
        ) from None


@contextlib.asynccontextmanager
async def nats_edge(
    url: str,
    edge: NatsEdge,
    names: NatsNames,
    *,
    pool: Pool | None,
    redis_outbox: RedisSettlementsOutbox | None = None,
    ack_wait_s: float = ACK_WAIT_S,
    max_ack_pending: int = MAX_ACK_PENDING,
    max_deliveries: int = MAX_DELIVERIES,
    ping: Callable[[], Awaitable[None]] | None = None,
    settlement_results: SettlementResults | None = None,
) -> AsyncIterator[Client]:
    nc = await connect(url, name=f"{names.prefix}-api")
    js = nc.jetstream()
    responder = RequestResponder(nc, edge, names)
    consumer = StreamConsumer(
        nc,
        js,
        edge,
        names,
        max_in_flight=max_ack_pending,
        max_deliveries=max_deliveries,
        ping=ping,
    )
    relay: SettlementsRelay | RedisSettlementsRelay | None = None
    if redis_outbox is not None:
        relay = RedisSettlementsRelay(redis_outbox, js, names)
    elif pool is not None:
        relay = SettlementsRelay(
            pool, js, names, clock=edge.driver.clock, results=settlement_results
        )
    try:
        streams = await ensure_streams(
            js, names, ack_wait_s=ack_wait_s, max_ack_pending=max_ack_pending
        )
        await responder.start()
        await consumer.start()
        if relay is not None:
            await relay.start()
        log.info("ujobs.nats.listening", extra={"prefix": names.prefix, "streams": streams})
        yield nc
    finally:
        if relay is not None:
            await relay.stop()
        await consumer.stop()
        await responder.stop()
        with contextlib.suppress(Exception):
            await nc.drain()


__all__ = ["connect", "nats_edge"]
