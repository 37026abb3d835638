"""The artifact's layout: part keys rebuilt from an index, and the manifest written last.

```
<prefix>/part-00000.csv
<prefix>/part-00001.csv
<prefix>/manifest.json
```

The manifest COUNTS parts (and rows and bytes) and never lists them: ``part_key(prefix, i,
extension)`` rebuilds every key, and a list would be the one thing in the pass that grows with
the export. It is written after the last part, so its presence means the artifact is whole.
"""

from __future__ import annotations

import builtins
import re
from dataclasses import dataclass
from typing import Any

import orjson

from ujobs.errors import InputInvalidError

__all__ = [
    "MANIFEST_NAME",
    "MANIFEST_VERSION",
    "Manifest",
    "manifest_key",
    "part_key",
    "validate_prefix",
]

MANIFEST_NAME = "manifest.json"
MANIFEST_VERSION = 1
_SEGMENT = re.compile(r"[A-Za-z0-9._=+@:-]+")


def validate_prefix(prefix: Any, *, job: str) -> str:
    """``prefix(input)``'s answer, refused unless it is a plain relative key path."""
    if isinstance(prefix, str):
        segments = prefix.strip("/").split("/")
        if prefix.strip("/") and all(
            _SEGMENT.fullmatch(s) and s not in (".", "..") for s in segments
        ):
            return "/".join(segments)
    raise InputInvalidError(
        f"export {job!r}: prefix(input) answered {prefix!r}; it must be a relative key path of "
        "segments made of letters, digits and . _ = + @ : - (no empty, '.' or '..' segment)",
        meta={"job": job, "issues": [{"path": "prefix", "message": "not a key path"}]},
    )


def part_key(prefix: str, index: int, extension: str) -> str:
    return f"{prefix}/part-{index:05d}.{extension}"


def manifest_key(prefix: str) -> str:
    return f"{prefix}/{MANIFEST_NAME}"


@dataclass(frozen=True, slots=True)
class Manifest:
    """What ``manifest.json`` says: how many parts, rows and bytes, in which format."""

    name: str
    job_id: str
    tenant: str | None
    prefix: str
    format: str
    extension: str
    content_type: str
    columns: tuple[str, ...]
    parts: int
    rows: int
    bytes: int
    bom: bool = False
    version: int = MANIFEST_VERSION

    def part_keys(self) -> list[str]:
        return [part_key(self.prefix, i, self.extension) for i in range(self.parts)]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "name": self.name,
            "jobId": self.job_id,
            "tenant": self.tenant,
            "prefix": self.prefix,
            "format": self.format,
            "extension": self.extension,
            "contentType": self.content_type,
            "columns": list(self.columns),
            "bom": self.bom,
            "parts": self.parts,
            "rows": self.rows,
            "bytes": self.bytes,
        }

    def encode(self) -> builtins.bytes:
        return orjson.dumps(self.to_json(), option=orjson.OPT_INDENT_2) + b"\n"

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Manifest:
        return cls(
            name=str(data["name"]),
            job_id=str(data["jobId"]),
            tenant=data.get("tenant"),
            prefix=str(data["prefix"]),
            format=str(data["format"]),
            extension=str(data["extension"]),
            content_type=str(data["contentType"]),
            columns=tuple(data["columns"]),
            parts=int(data["parts"]),
            rows=int(data["rows"]),
            bytes=int(data["bytes"]),
            bom=bool(data.get("bom", False)),
            version=int(data.get("version", MANIFEST_VERSION)),
        )

    @classmethod
    def decode(cls, raw: builtins.bytes) -> Manifest:
        return cls.from_json(orjson.loads(raw))
