"""The drivers. Each backend module is imported only when asked for, so a Postgres deployment
never imports redis and a Redis one never imports asyncpg."""

from __future__ import annotations

from typing import Any

from shared.jobs.enqueue_target import job_driver, reset_job_driver, set_job_driver

__all__ = [
    "job_driver",
    "memory_driver",
    "postgres_driver",
    "redis_driver",
    "reset_job_driver",
    "set_job_driver",
]

_LAZY = {
    "memory_driver": "shared.drivers.memory.driver",
    "postgres_driver": "shared.drivers.postgres.driver",
    "redis_driver": "shared.drivers.redis.driver",
}


def __getattr__(name: str) -> Any:
    module_name = _LAZY.get(name)
    if module_name is None:
        raise AttributeError(f"module 'shared.drivers' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module_name), name)
