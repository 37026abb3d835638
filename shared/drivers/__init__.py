"""The drivers. Each backend module is imported only when asked for, so a Postgres deployment
never imports redis and a Redis one never imports asyncpg.

The map:

- ``base``: the driver contract (``JobDriver``) and the capability checks, re-exporting
  ``records`` (states, limits, the core operations' messages), ``operator_surface``
  (``JobIntrospection`` and its rows) and ``fleet`` (leases, the worker registry, the backfill
  ledger).
- ``children``: the ``children`` capability: a child recorded with its parent, the parent's
  wait marked on its children and woken by the last one's settle.
- ``fairness``: the tenant-fair hand-out order every driver's claim follows (weighted round
  robin from a rotating cursor) and the ``weights`` capability (``TenantWeights``).
- ``delegating``: a driver that hands every call to an inner one, for wrappers to build on.
- ``request_rows``: one job's batch enqueue as its shared fields and each input's part
  (``RequestRows``), an iterable of requests that a driver writing rows reads without them.
- ``results``: the ``results`` capability: waiting for a job to settle, woken by the settle
  itself (``wait_settled``).
- ``keyspace``: ``StoreWatch``, the capability of a store that can lose its whole keyspace
  under a running worker (Redis) and tell when it did.
- ``memory``, ``postgres``, ``redis``: one package per backend (each ``__init__`` its map).

A type checker sees the three builders as what they are (the imports under ``TYPE_CHECKING``);
at run time the module's ``__getattr__`` imports the backend on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from ujobs.drivers.base import JobDriver
from ujobs.jobs.enqueue_target import job_driver, reset_job_driver, set_job_driver

if TYPE_CHECKING:
    from ujobs.drivers.memory.driver import memory_driver
    from ujobs.drivers.postgres.driver import postgres_driver
    from ujobs.drivers.redis.driver import redis_driver

__all__ = [
    "JobDriver",
    "job_driver",
    "memory_driver",
    "postgres_driver",
    "redis_driver",
    "reset_job_driver",
    "set_job_driver",
]

_LAZY = {
    "memory_driver": "ujobs.drivers.memory.driver",
    "postgres_driver": "ujobs.drivers.postgres.driver",
    "redis_driver": "ujobs.drivers.redis.driver",
}

if not TYPE_CHECKING:
    # Hidden from the type checker, so an unknown name stays an error there instead of Any.

    def __getattr__(name: str) -> object:
        module_name = _LAZY.get(name)
        if module_name is None:
            raise AttributeError(f"module 'ujobs.drivers' has no attribute {name!r}")
        return getattr(importlib.import_module(module_name), name)
