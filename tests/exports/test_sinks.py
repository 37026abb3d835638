"""Sinks over obstore: the filesystem, and S3 against a local moto server."""

from __future__ import annotations

import tracemalloc
from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import aiohttp
import obstore
import pytest

from tests.exports.conftest import LocalS3
from tests.exports.kit import attempt, enqueue, frozen_driver, numbered
from ujobs.errors import ConfigInvalidError, ExportPartTooLargeError
from ujobs.exports.family import export_rows
from ujobs.exports.sinks import (
    MULTIPART_MIN_BYTES,
    ExportNotFoundError,
    ObjectStoreSink,
    default_sink,
    filesystem_sink,
    set_default_sink,
    sink_from_url,
)
from ujobs.jobs.schema import t

MIB = 1024 * 1024


async def chunks(n: int, size: int = MIB, *, fail_after: int | None = None) -> AsyncIterator[bytes]:
    for i in range(n):
        if fail_after is not None and i == fail_after:
            raise ExportPartTooLargeError("part too large", meta={"batch": 7})
        yield bytes([65 + i % 26]) * size


async def read(sink: ObjectStoreSink, key: str) -> bytes:
    return b"".join([c async for c in sink.read(key)])


async def test_the_filesystem_sink_writes_replaces_reads_and_sizes(tmp_path: Path) -> None:
    sink = filesystem_sink(tmp_path / "store")
    assert await sink.write("a/b/part-00000.csv", chunks(2, 10), content_type="text/csv") == 20
    assert (tmp_path / "store/a/b/part-00000.csv").read_bytes() == b"A" * 10 + b"B" * 10
    await sink.write("a/b/part-00000.csv", chunks(1, 3), content_type="text/csv")
    assert await read(sink, "a/b/part-00000.csv") == b"AAA"
    assert await sink.size("a/b/part-00000.csv") == 3
    assert await sink.link("a/b/part-00000.csv", timedelta(minutes=5)) is None
    with pytest.raises(ExportNotFoundError):
        await read(sink, "a/b/missing.csv")
    with pytest.raises(ExportNotFoundError):
        await sink.size("a/b/missing.csv")


async def test_a_big_filesystem_part_streams_through_multipart(tmp_path: Path) -> None:
    sink = filesystem_sink(tmp_path)
    size = await sink.write("big.csv", chunks(12), content_type="text/csv")
    assert size == 12 * MIB
    data = (tmp_path / "big.csv").read_bytes()
    assert data[:MIB] == b"A" * MIB
    assert data[-MIB:] == b"L" * MIB


async def test_s3_small_part_is_one_put_and_a_big_one_a_multipart_upload(
    local_s3: LocalS3,
) -> None:
    bucket = local_s3.bucket()
    sink = local_s3.sink(bucket)
    await sink.write("small.csv", chunks(3, 1000), content_type="text/csv")
    await sink.write("big.csv", chunks(12), content_type="text/csv")
    assert await read(sink, "small.csv") == b"A" * 1000 + b"B" * 1000 + b"C" * 1000
    assert await sink.size("big.csv") == 12 * MIB
    small = await obstore.head_async(sink.store, "small.csv")
    big = await obstore.head_async(sink.store, "big.csv")
    # A multipart object's ETag is "<md5 of the part md5s>-<parts>".
    assert "-" not in (small["e_tag"] or "")
    assert (big["e_tag"] or "").strip('"').endswith("-3")
    got = await obstore.get_async(sink.store, "big.csv")
    assert got.attributes.get("Content-Type") == "text/csv"


async def test_an_error_mid_upload_is_re_raised_with_its_code_and_leaves_no_object(
    local_s3: LocalS3, tmp_path: Path
) -> None:
    for sink in (local_s3.sink(local_s3.bucket()), filesystem_sink(tmp_path)):
        with pytest.raises(ExportPartTooLargeError) as caught:
            await sink.write("part.csv", chunks(12, fail_after=8), content_type="text/csv")
        assert caught.value.meta == {"batch": 7}
        with pytest.raises(ExportNotFoundError):
            await sink.size("part.csv")


async def test_s3_links_are_presigned_urls_anyone_can_get(local_s3: LocalS3) -> None:
    sink = local_s3.sink(local_s3.bucket())
    await sink.write("exports/o/part-00000.csv", chunks(1, 5), content_type="text/csv")
    url = await sink.link("exports/o/part-00000.csv", timedelta(minutes=5))
    assert url is not None
    assert "X-Amz-Signature=" in url
    async with aiohttp.ClientSession() as http, http.get(url) as answer:
        assert answer.status == 200
        assert await answer.read() == b"AAAAA"


async def test_an_export_to_s3_writes_its_parts_and_manifest(local_s3: LocalS3) -> None:
    bucket = local_s3.bucket()
    handle = export_rows(
        name="orders.s3",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=numbered(25),
        columns=["id", "name"],
        sink=lambda: local_s3.sink(bucket),
        batch=10,
    )
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    done = await attempt(driver, handle)
    assert done.outcome == "completed", done.error
    sink = local_s3.sink(bucket)
    whole = b"".join([await read(sink, f"exports/org-1/part-0000{i}.csv") for i in range(3)])
    assert whole.startswith(b"id,name\n0,row 0\n")
    assert whole.endswith(b"24,row 24\n")
    assert b'"parts": 3' in await read(sink, "exports/org-1/manifest.json")


async def test_an_export_with_no_sink_writes_to_the_process_default(tmp_path: Path) -> None:
    set_default_sink(filesystem_sink(tmp_path))
    handle = export_rows(
        name="orders.default",
        input=t.object(org_id=t.string),
        tenant=lambda i: i.org_id,
        prefix=lambda i: f"exports/{i.org_id}",
        source=numbered(3),
        columns=["id", "name"],
    )
    driver = frozen_driver()
    await enqueue(driver, handle, {"org_id": "org-1"})
    assert (await attempt(driver, handle)).outcome == "completed"
    assert (tmp_path / "exports/org-1/manifest.json").exists()


async def test_the_sink_is_read_when_the_job_runs_never_where_it_is_declared(
    tmp_path: Path,
) -> None:
    """A thunk, read when a job runs: storage configured after the declaration (the app's
    startup, ``UJOBS_EXPORT_URL`` installed by the service) is the storage written to."""
    calls: list[str] = []

    def sink() -> ObjectStoreSink:
        calls.append("sink")
        return filesystem_sink(tmp_path / "declared")

    common: dict[str, Any] = {
        "input": t.object(org_id=t.string),
        "tenant": lambda i: i.org_id,
        "prefix": lambda i: f"exports/{i.org_id}",
        "source": numbered(3),
        "columns": ["id", "name"],
    }
    given = export_rows(name="orders.given", sink=sink, **common)
    default = export_rows(name="orders.later", **common)
    assert calls == []
    set_default_sink(filesystem_sink(tmp_path / "configured-later"))
    driver = frozen_driver()
    for handle in (given, default):
        await enqueue(driver, handle, {"org_id": "org-1"})
        assert (await attempt(driver, handle)).outcome == "completed"
    assert calls == ["sink"]
    assert (tmp_path / "declared/exports/org-1/manifest.json").exists()
    assert (tmp_path / "configured-later/exports/org-1/manifest.json").exists()


def test_the_default_sink_is_the_filesystem_under_dot_ujobs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    sink = default_sink()
    assert isinstance(sink, ObjectStoreSink)
    assert sink.url == (tmp_path / ".ujobs/exports").resolve().as_uri()


def test_sink_from_url_reads_file_paths_and_store_urls(tmp_path: Path, local_s3: LocalS3) -> None:
    assert sink_from_url(f"file://{tmp_path}/x").url == (tmp_path / "x").as_uri()
    assert sink_from_url(str(tmp_path / "y")).url == (tmp_path / "y").as_uri()
    s3 = sink_from_url(
        "s3://some-bucket/pre", endpoint=local_s3.endpoint, region="us-east-1", allow_http=True
    )
    assert s3.signs_links
    with pytest.raises(ConfigInvalidError):
        sink_from_url("nope://bucket")
    with pytest.raises(ConfigInvalidError):
        ObjectStoreSink(s3.store, chunk_size=MULTIPART_MIN_BYTES - 1)


async def test_a_big_part_streams_and_is_never_held_whole(tmp_path: Path) -> None:
    sink = filesystem_sink(tmp_path)
    tracemalloc.start()
    try:
        size = await sink.write("big.csv", chunks(48), content_type="text/csv")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert size == 48 * MIB
    # The sink holds at most one multipart piece (5 MiB) of the 48 before handing it on.
    assert peak < 16 * MIB
