"""``ujobs exporter``: a worker pinned to the ``exports`` queue.

A large export is a job that streams rows for minutes; it runs on its own pods so it never
holds a slot an interactive job needs, with a drain budget sized for it (compose gives it
300 s). ``UJOBS_QUEUES`` does not apply; everything else a worker reads does.
"""

from __future__ import annotations

from collections.abc import Mapping

from services.config import WorkerConfig

EXPORTS_QUEUE = "exports"


def exporter_config(
    env: Mapping[str, str], *, app: str | None = None, driver: str | None = None
) -> WorkerConfig:
    return WorkerConfig.load(
        env, service="exporter", pinned_queues=(EXPORTS_QUEUE,), app=app, driver=driver
    )
