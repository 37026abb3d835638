"""Sinks: where an export's parts and manifest go, through one object-store library.

``ExportSink`` is the seam the export pass writes to; ``ObjectStoreSink`` is its one
implementation, over ``obstore`` (Rust ``object_store``): the local filesystem, S3 and
S3-compatible stores, GCS and Azure behind one API. Build one with ``filesystem_sink(root)``,
``s3_sink(bucket, ...)`` or ``sink_from_url(url)``; ``default_sink()`` is what an export with no
``sink=`` writes to (the process's, which the services set from ``UJOBS_EXPORT_URL``; the
filesystem under ``.ujobs/exports`` when nobody did).

A part streams: its chunks go out as they are encoded. A part smaller than the store's
multipart minimum (5 MiB on S3) is one PUT; a bigger one is a multipart upload of
``chunk_size`` pieces, at most ``max_concurrency`` in flight, so the memory a part holds is
bounded by those two numbers and never by the part's size.
"""

from __future__ import annotations

from collections.abc import AsyncIterable, AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import obstore
from obstore.exceptions import NotFoundError
from obstore.store import AzureStore, GCSStore, LocalStore, ObjectStore, S3Store

from ujobs.errors import ConfigInvalidError, UltimateError

if TYPE_CHECKING:
    from obstore.store import ClientConfig

__all__ = [
    "DEFAULT_EXPORT_ROOT",
    "MULTIPART_MIN_BYTES",
    "ExportNotFoundError",
    "ExportSink",
    "ObjectStoreSink",
    "default_sink",
    "filesystem_sink",
    "reset_default_sink",
    "s3_sink",
    "set_default_sink",
    "sink_from_url",
]

MULTIPART_MIN_BYTES = 5 * 1024 * 1024
DEFAULT_EXPORT_ROOT = Path(".ujobs") / "exports"


class ExportNotFoundError(UltimateError):
    """An export, a part or a manifest that is not there (yet)."""

    code = "X_EXPORT_NOT_FOUND"


class ExportSink(Protocol):
    """What the export pass needs from storage."""

    async def write(self, key: str, chunks: AsyncIterable[bytes], *, content_type: str) -> int:
        """Store the object ``key`` from ``chunks`` (replacing one there); answers its size."""
        ...

    def read(self, key: str) -> AsyncIterator[bytes]:
        """The object's bytes as they arrive; ``X_EXPORT_NOT_FOUND`` when it is not there."""
        ...

    async def link(self, key: str, expires_in: timedelta) -> str | None:
        """A presigned GET URL for ``key``, or None when the store cannot sign (the
        filesystem: the api serves such parts through its own signed links)."""
        ...

    async def size(self, key: str) -> int:
        """The object's size; ``X_EXPORT_NOT_FOUND`` when it is not there."""
        ...


class ObjectStoreSink:
    """An ``ExportSink`` over any ``obstore`` store."""

    def __init__(
        self,
        store: ObjectStore,
        *,
        chunk_size: int = MULTIPART_MIN_BYTES,
        max_concurrency: int = 2,
        url: str | None = None,
    ) -> None:
        if chunk_size < MULTIPART_MIN_BYTES:
            raise ConfigInvalidError(
                f"chunk_size {chunk_size} is under the multipart minimum "
                f"({MULTIPART_MIN_BYTES} bytes, S3's): a multipart upload of smaller pieces fails",
                meta={"field": "chunk_size"},
            )
        self.store = store
        self.chunk_size = chunk_size
        self.max_concurrency = max_concurrency
        self.url = url

    async def write(self, key: str, chunks: AsyncIterable[bytes], *, content_type: str) -> int:
        stream = aiter(chunks)
        head: list[bytes] = []
        held = 0
        async for chunk in stream:
            head.append(chunk)
            held += len(chunk)
            if held >= self.chunk_size:
                break
        else:
            body = b"".join(head)
            await obstore.put_async(
                self.store,
                key,
                body,
                attributes=self._attributes(content_type),
                use_multipart=False,
            )
            return len(body)
        counted = _Counted(head, stream)
        try:
            await obstore.put_async(
                self.store,
                key,
                counted,
                attributes=self._attributes(content_type),
                use_multipart=True,
                chunk_size=self.chunk_size,
                max_concurrency=self.max_concurrency,
            )
        except Exception:
            counted.raise_if_failed()  # our own error first, whatever the store made of it
            raise
        counted.raise_if_failed()
        return counted.size

    def _attributes(self, content_type: str) -> Any:
        # The filesystem keeps no object attributes (obstore refuses them there).
        return None if isinstance(self.store, LocalStore) else {"Content-Type": content_type}

    async def read(self, key: str) -> AsyncIterator[bytes]:
        try:
            result = await obstore.get_async(self.store, key)
        except (FileNotFoundError, NotFoundError):
            raise _missing(key) from None
        async for chunk in result.stream(min_chunk_size=256 * 1024):
            yield bytes(chunk)

    async def size(self, key: str) -> int:
        try:
            meta = await obstore.head_async(self.store, key)
        except (FileNotFoundError, NotFoundError):
            raise _missing(key) from None
        return int(meta["size"])

    async def link(self, key: str, expires_in: timedelta) -> str | None:
        if isinstance(self.store, S3Store | GCSStore | AzureStore):
            return await obstore.sign_async(self.store, "GET", key, expires_in)
        return None

    @property
    def signs_links(self) -> bool:
        return isinstance(self.store, S3Store | GCSStore | AzureStore)

    def __repr__(self) -> str:
        return f"ObjectStoreSink({self.url or type(self.store).__name__})"


class _Counted:
    """The chunks of a multipart upload: the held head, then the rest, counted as they pass.

    An error raised while producing a chunk (a row refused mid-part, a part past its bound)
    is kept, because the store library reports it as its own upload failure; the sink
    re-raises the original so the caller sees the ``X_…`` code.
    """

    def __init__(self, head: list[bytes], rest: AsyncIterator[bytes]) -> None:
        self._head = head
        self._rest = rest
        self.size = 0
        self.error: BaseException | None = None

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[bytes]:
        while self._head:
            chunk = self._head.pop(0)
            self.size += len(chunk)
            yield chunk
        try:
            async for chunk in self._rest:
                self.size += len(chunk)
                yield chunk
        except BaseException as exc:
            self.error = exc
            raise

    def raise_if_failed(self) -> None:
        if self.error is not None:
            raise self.error


def _missing(key: str) -> ExportNotFoundError:
    return ExportNotFoundError(
        f"no object at {key!r}; the export may still be running, or was written elsewhere",
        meta={"key": key},
    )


def filesystem_sink(root: str | Path) -> ObjectStoreSink:
    """Parts as files under ``root`` (created when missing)."""
    path = Path(root).resolve()
    path.mkdir(parents=True, exist_ok=True)
    return ObjectStoreSink(LocalStore(path, mkdir=True), url=path.as_uri())


def s3_sink(
    bucket: str,
    *,
    endpoint: str | None = None,
    region: str | None = None,
    access_key_id: str | None = None,
    secret_access_key: str | None = None,
    allow_http: bool = False,
    prefix: str | None = None,
) -> ObjectStoreSink:
    """Parts as objects in an S3 (or S3-compatible) bucket; links are presigned URLs."""
    config: dict[str, Any] = {}
    if endpoint is not None:
        config["endpoint"] = endpoint
    if region is not None:
        config["region"] = region
    if access_key_id is not None:
        config["access_key_id"] = access_key_id
    if secret_access_key is not None:
        config["secret_access_key"] = secret_access_key
    client: ClientConfig | None = {"allow_http": True} if allow_http else None
    store = S3Store(bucket, prefix=prefix, client_options=client, **config)
    return ObjectStoreSink(store, url=f"s3://{bucket}" + (f"/{prefix}" if prefix else ""))


def sink_from_url(url: str, **options: Any) -> ObjectStoreSink:
    """A sink from a URL: ``file:///var/exports``, ``s3://bucket/prefix``, ``gs://…``,
    ``az://…``; ``options`` go to the store (``endpoint=``, ``region=``, credentials)."""
    if url.startswith("file://"):
        return filesystem_sink(Path(url.removeprefix("file://")))
    if "://" not in url:
        return filesystem_sink(Path(url))
    client: ClientConfig | None = {"allow_http": True} if options.pop("allow_http", False) else None
    try:
        store = obstore.store.from_url(url, client_options=client, **options)
    except Exception as exc:
        raise ConfigInvalidError(
            f"export store {url!r}: {exc}", meta={"variable": "UJOBS_EXPORT_URL"}
        ) from None
    return ObjectStoreSink(store, url=url)


_default: ExportSink | None = None


def set_default_sink(sink: ExportSink) -> None:
    """The sink an export declared without ``sink=`` writes to in this process."""
    global _default
    _default = sink


def reset_default_sink() -> None:
    global _default
    _default = None


def default_sink() -> ExportSink:
    """The process's sink; the filesystem under ``.ujobs/exports`` when none was set."""
    global _default
    if _default is None:
        _default = filesystem_sink(DEFAULT_EXPORT_ROOT)
    return _default
