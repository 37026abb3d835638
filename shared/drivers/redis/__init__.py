"""The Redis driver: the queue off the database, one Lua script per operation (``lua/``).

The map:

- ``batch``: Script calls issued in one turn of the event loop leave as ONE pipeline: one write,
  one read.
- ``codec``: What crosses the wire to the Redis driver's scripts, both ways.
- ``driver``: The Redis driver: the queue off the database, one Lua script per operation.
- ``mark``: The Redis driver's keyspace mark (``ujobs.drivers.keyspace.StoreWatch``).
- ``scripts``: The Redis driver's Lua scripts: read once from ``shared/drivers/redis/lua/``,
  called by SHA.
- ``settlements``: The Redis driver's settlements outbox, read from outside the driver (the
  api's relay).

What this package exports is the public import path of DESIGN.md; code inside
``shared`` imports the leaf modules instead, so no import cycle can form.
"""

from __future__ import annotations

from ujobs.drivers.redis.driver import (
    DEFAULT_DONE_TTL_MS,
    DEFAULT_WAKE_SLOT_MS,
    RedisDriver,
    redis_driver,
)

__all__ = [
    "DEFAULT_DONE_TTL_MS",
    "DEFAULT_WAKE_SLOT_MS",
    "RedisDriver",
    "redis_driver",
]
