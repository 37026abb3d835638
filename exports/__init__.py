"""The export job family: ``export_rows()`` streams a paged read to object storage.

from ujobs.exports import export_rows, keyset, iterate, filesystem_sink, s3_sink

Map: ``family`` (the declaration and its job body), ``writer`` (one page → one part),
``encoders`` (CSV and JSONL), ``sources`` (the source protocol, ``iterate``), ``keyset``
(asyncpg keyset reads), ``library_pool`` (the service's own pool, for a ``keyset()`` without
``pool=``), ``sinks`` (``obstore`` stores), ``manifest`` (keys and the manifest),
``rate`` (pacing), ``downloads`` (finding an export and its links, for the api and the CLI).
"""

from __future__ import annotations

from ujobs.exports.encoders import CsvEncoder, JsonlEncoder, neutralise
from ujobs.exports.family import EXPORTS_QUEUE, ExportSpec, export_of, export_rows
from ujobs.exports.keyset import KeysetSource, keyset
from ujobs.exports.manifest import Manifest, manifest_key, part_key
from ujobs.exports.sinks import (
    ExportNotFoundError,
    ExportSink,
    ObjectStoreSink,
    default_sink,
    filesystem_sink,
    s3_sink,
    set_default_sink,
    sink_from_url,
)
from ujobs.exports.sources import ExportSource, iterate, skip

__all__ = [
    "EXPORTS_QUEUE",
    "CsvEncoder",
    "ExportNotFoundError",
    "ExportSink",
    "ExportSource",
    "ExportSpec",
    "JsonlEncoder",
    "KeysetSource",
    "Manifest",
    "ObjectStoreSink",
    "default_sink",
    "export_of",
    "export_rows",
    "filesystem_sink",
    "iterate",
    "keyset",
    "manifest_key",
    "neutralise",
    "part_key",
    "s3_sink",
    "set_default_sink",
    "sink_from_url",
    "skip",
]
