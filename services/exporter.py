"""``ujobs exporter``: a worker pinned to the ``exports`` queue, and where exports are stored.

A large export is a job that streams rows for minutes; it runs on its own pods so it never
holds a slot an interactive job needs, with a drain budget sized for it (compose gives it
300 s). ``UJOBS_QUEUES`` does not apply; everything else a worker reads does.

``ExportSettings`` is the exports' half of the environment, read by the exporter (and any
worker or ``ujobs dev`` running exports), the api (to serve downloads) and ``ujobs exports``:
``UJOBS_EXPORT_URL`` is the store an export declared without ``sink=`` writes to (a path,
``file://``, ``s3://bucket/prefix``, ``gs://``, ``az://``; the store's own variables —
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, … — configure the client), and
``UJOBS_SECRET_KEY`` signs the api's expiring download links for parts on the filesystem.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from exports.family import EXPORTS_QUEUE
from exports.sinks import set_default_sink, sink_from_url
from services.config import WorkerConfig
from services.config_parse import invalid
from services.secret_key import secret_key_text

__all__ = ["EXPORTS_QUEUE", "MIN_SECRET_KEY_LENGTH", "ExportSettings", "exporter_config"]

MIN_SECRET_KEY_LENGTH = 32


def exporter_config(
    env: Mapping[str, str], *, app: str | None = None, driver: str | None = None
) -> WorkerConfig:
    ExportSettings.load(env).install()
    return WorkerConfig.load(
        env, service="exporter", pinned_queues=(EXPORTS_QUEUE,), app=app, driver=driver
    )


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Where exports are stored and the key that signs their links. ``repr`` hides the key."""

    url: str | None = None
    secret_key: bytes | None = field(default=None, repr=False)

    @classmethod
    def load(cls, env: Mapping[str, str]) -> ExportSettings:
        url = env.get("UJOBS_EXPORT_URL", "").strip() or None
        raw_key = secret_key_text(env) or ""
        key = raw_key.encode() if raw_key else None
        if key is not None and len(key) < MIN_SECRET_KEY_LENGTH:
            raise invalid(
                "UJOBS_SECRET_KEY",
                f"a signing key needs at least {MIN_SECRET_KEY_LENGTH} bytes; generate one with "
                "`ujobs webhooks new-key` (the same key seals webhook endpoint secrets)",
            )
        return cls(url=url, secret_key=key)

    def install(self) -> None:
        """Make ``UJOBS_EXPORT_URL`` this process's default sink (when it is set)."""
        if self.url is not None:
            set_default_sink(sink_from_url(self.url))
