"""``ujobs exporter``: a worker pinned to the ``exports`` queue, and where exports are stored.

A large export is a job that streams rows for minutes; it runs on its own pods so it never
holds a slot an interactive job needs, with a drain budget sized for it (compose gives it
300 s). ``UJOBS_QUEUES`` does not apply; everything else a worker reads does.

``ExportSettings`` is the exports' half of the environment, read by the exporter (and any
worker or ``ujobs dev`` running exports), the api (to serve downloads) and ``ujobs exports``:
``UJOBS_EXPORT_URL`` is the store an export declared without ``sink=`` writes to (a path,
``file://``, ``s3://bucket/prefix``, ``gs://``, ``az://``; the store's own variables —
``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, … — configure the client), and
``UJOBS_SECRET_KEY`` signs the api's expiring download links for parts on the filesystem: the
same value, read the same way (``ujobs.webhooks.secrets.parse_keys``), as the key that seals webhook
endpoint secrets, so one key made by ``ujobs webhooks new-key`` serves both and a value one of
them would refuse is refused by both. The first key signs; a link signed under any key of the
list opens, so a rotation does not break the links handed out before it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ujobs.exports.family import EXPORTS_QUEUE
from ujobs.exports.sinks import set_default_sink, sink_from_url
from ujobs.services.config.settings import WorkerConfig
from ujobs.services.runtime.secret_key import secret_key_text
from ujobs.webhooks.secrets import parse_keys

__all__ = ["EXPORTS_QUEUE", "ExportSettings", "exporter_config"]


def exporter_config(
    env: Mapping[str, str], *, app: str | None = None, driver: str | None = None
) -> WorkerConfig:
    ExportSettings.load(env).install()
    return WorkerConfig.load(
        env, service="exporter", pinned_queues=(EXPORTS_QUEUE,), app=app, driver=driver
    )


@dataclass(frozen=True, slots=True)
class ExportSettings:
    """Where exports are stored and the keys that sign and check their links (the first
    signs). ``repr`` hides the keys."""

    url: str | None = None
    secret_keys: tuple[bytes, ...] = field(default=(), repr=False)

    @property
    def secret_key(self) -> bytes | None:
        """The key new links are signed with; None: no links."""
        return self.secret_keys[0] if self.secret_keys else None

    @classmethod
    def load(cls, env: Mapping[str, str]) -> ExportSettings:
        url = env.get("UJOBS_EXPORT_URL", "").strip() or None
        text = secret_key_text(env)
        keys = tuple(key for _, key in parse_keys(text)) if text else ()
        return cls(url=url, secret_keys=keys)

    def install(self) -> None:
        """Make ``UJOBS_EXPORT_URL`` this process's default sink (when it is set)."""
        if self.url is not None:
            set_default_sink(sink_from_url(self.url))
