"""``export_rows()``: every rule row of SEED § "Exporting a large dataset is a job too"."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.exports.kit import attempt, enqueue, files, frozen_driver, numbered
from ujobs.context import cross_tenant_reason, require_tenant
from ujobs.errors import (
    JobDeclarationInvalidError,
    JobMaxAttemptsError,
    TenancyActorOrgRequiredError,
)
from ujobs.exports.family import export_of, export_rows
from ujobs.exports.manifest import Manifest, part_key
from ujobs.exports.rate import RowRate
from ujobs.exports.sinks import filesystem_sink
from ujobs.exports.sources import iterate
from ujobs.jobs.schema import t

INPUT = t.object(org_id=t.string, export_id=t.string)
ORG = {"org_id": "org-1", "export_id": "e1"}


def declare(root: Path, source: Any, **options: Any) -> Any:
    defaults: dict[str, Any] = {
        "name": "orders.export",
        "input": INPUT,
        "tenant": lambda i: i.org_id,
        "prefix": lambda i: f"exports/{i.org_id}/{i.export_id}",
        "source": source,
        "columns": ["id", "name"],
        "sink": lambda: filesystem_sink(root),
        "batch": 10,
    }
    return export_rows(**{**defaults, **options})


def parts_of(root: Path, prefix: str = "exports/org-1/e1") -> list[bytes]:
    found = files(root)
    manifest = Manifest.decode(found[f"{prefix}/manifest.json"])
    return [found[key] for key in manifest.part_keys()]


async def test_one_object_per_page_keyed_by_the_page_index_then_the_manifest(
    tmp_path: Path,
) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(25))
    await enqueue(driver, handle, ORG)
    done = await attempt(driver, handle)
    assert done.outcome == "completed", done.error
    assert sorted(files(tmp_path)) == [
        "exports/org-1/e1/manifest.json",
        "exports/org-1/e1/part-00000.csv",
        "exports/org-1/e1/part-00001.csv",
        "exports/org-1/e1/part-00002.csv",
    ]
    assert done.result["parts"] == 3
    assert done.result["rows"] == 25


async def test_the_header_is_in_part_0_only_and_cat_of_the_parts_is_one_valid_file(
    tmp_path: Path,
) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(23))
    await enqueue(driver, handle, ORG)
    assert (await attempt(driver, handle)).outcome == "completed"
    parts = parts_of(tmp_path)
    assert [p.startswith(b"id,name\n") for p in parts] == [True, False, False]
    assert all(p.endswith(b"\n") for p in parts)
    whole = b"".join(parts).decode()
    rows = list(csv.reader(io.StringIO(whole, newline="")))
    assert rows[0] == ["id", "name"]
    assert rows[1:] == [[str(i), f"row {i}"] for i in range(23)]


async def test_a_step_persists_the_cursor_and_counters_never_the_page(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(25))
    job_id = await enqueue(driver, handle, ORG)
    await attempt(driver, handle)
    row = await driver.introspect.get(job_id)  # type: ignore[union-attr]
    assert row is not None
    steps = await driver.load_steps(row.run_id, tenant_id=row.tenant_id)
    assert [s.name for s in steps] == ["part-00000", "part-00001", "part-00002", "manifest"]
    two_parts = sum(len(p) for p in parts_of(tmp_path)[:2])
    assert steps[1].output == {
        "cursor": 20,
        "rows": 20,
        "bytes": two_parts,
        "parts": 2,
        "more": True,
    }
    assert all(b"row " not in orjson.dumps(s.output) for s in steps[:3])


async def test_a_page_that_runs_twice_rewrites_its_part_and_the_artifact_is_identical(
    tmp_path: Path,
) -> None:
    reference = tmp_path / "reference"
    driver = frozen_driver()
    whole = declare(reference, numbered(35), name="orders.whole")
    await enqueue(driver, whole, ORG)
    assert (await attempt(driver, whole)).outcome == "completed"

    crashed = tmp_path / "crashed"
    reads: list[int] = []
    handle = declare(crashed, numbered(35, fail_at=15, reads=reads))
    await enqueue(driver, handle, ORG)
    first = await attempt(driver, handle)
    assert first.outcome == "retried"
    driver.clock.advance(3_600_000)  # type: ignore[attr-defined]
    second = await attempt(driver, handle)
    assert second.outcome == "completed", second.error
    # Page 0 replayed from its step (no read); page 1 re-read from the stored cursor.
    assert reads == [0, 10]
    assert parts_of(crashed) == parts_of(reference)
    assert sorted(files(crashed)) == sorted(files(reference))
    ours = Manifest.decode(files(crashed)["exports/org-1/e1/manifest.json"])
    theirs = Manifest.decode(files(reference)["exports/org-1/e1/manifest.json"])
    assert (ours.parts, ours.rows, ours.bytes) == (theirs.parts, theirs.rows, theirs.bytes)


async def test_the_last_full_page_leaves_no_empty_part(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(20))
    await enqueue(driver, handle, ORG)
    done = await attempt(driver, handle)
    assert done.result["parts"] == 2
    assert part_key("exports/org-1/e1", 2, "csv") not in files(tmp_path)


async def test_an_empty_export_is_part_0_with_its_header(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(0))
    await enqueue(driver, handle, ORG)
    done = await attempt(driver, handle)
    assert done.result["parts"] == 1
    assert done.result["rows"] == 0
    assert parts_of(tmp_path) == [b"id,name\n"]


async def test_a_part_past_max_part_bytes_names_the_batch_and_dead_letters(
    tmp_path: Path,
) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(25), max_part_bytes=64)
    await enqueue(driver, handle, ORG)
    done = await attempt(driver, handle)
    assert done.outcome == "dead-lettered"
    assert done.code == "X_EXPORT_PART_TOO_LARGE"
    assert done.error is not None
    assert "lower batch (now 10)" in str(done.error)
    assert getattr(done.error, "meta", {})["batch"] == 10


async def test_a_row_key_columns_does_not_carry_is_refused(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(
        tmp_path, numbered(5), row=lambda r: {**r, "secret": "s3cr3t"}, name="orders.leaky"
    )
    await enqueue(driver, handle, ORG)
    done = await attempt(driver, handle)
    assert done.outcome == "dead-lettered"
    assert done.code == "X_EXPORT_ROW_INVALID"
    assert getattr(done.error, "meta", {})["extra"] == ["secret"]


async def test_row_maps_each_source_row_and_csv_cells_are_neutralised(tmp_path: Path) -> None:
    driver = frozen_driver()

    def source(_: Any) -> Any:
        async def rows(start: int) -> Any:
            for name in ['=HYPERLINK("http://x")', "@me", "ok"][start:]:
                yield {"who": name, "owed": -12}

        return iterate(rows)

    handle = declare(
        tmp_path,
        source,
        columns=["name", "owed"],
        row=lambda r: {"name": r["who"], "owed": r["owed"]},
    )
    await enqueue(driver, handle, ORG)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert parts_of(tmp_path) == [
        b'name,owed\n"\'=HYPERLINK(""http://x"")",-12\n\'@me,-12\nok,-12\n'
    ]


async def test_jsonl_parts_are_one_object_a_line(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(12), format="jsonl")
    await enqueue(driver, handle, ORG)
    assert (await attempt(driver, handle)).outcome == "completed"
    found = files(tmp_path)
    assert "exports/org-1/e1/part-00001.jsonl" in found
    lines = b"".join(parts_of(tmp_path)).splitlines()
    assert [orjson.loads(line) for line in lines] == [
        {"id": i, "name": f"row {i}"} for i in range(12)
    ]


async def test_the_manifest_counts_parts_rows_and_bytes_and_lists_no_key(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(25), bom=True)
    job_id = await enqueue(driver, handle, ORG)
    await attempt(driver, handle)
    found = files(tmp_path)
    raw = orjson.loads(found["exports/org-1/e1/manifest.json"])
    assert {k: raw[k] for k in ("parts", "rows", "jobId", "tenant", "format", "bom")} == {
        "parts": 3,
        "rows": 25,
        "jobId": job_id,
        "tenant": "org-1",
        "format": "csv",
        "bom": True,
    }
    assert raw["bytes"] == sum(len(p) for p in parts_of(tmp_path))
    assert not any(isinstance(v, list) and v and "part-" in str(v[0]) for v in raw.values())
    assert parts_of(tmp_path)[0].startswith(b"\xef\xbb\xbfid,name")


async def test_tenant_none_gets_no_cross_tenant_escape(tmp_path: Path) -> None:
    seen: list[Any] = []

    def source(_: Any) -> Any:
        seen.append(cross_tenant_reason())
        seen.append(require_tenant())
        return numbered(3)(None)

    driver = frozen_driver()
    scoped = declare(tmp_path, source, name="orders.scoped")
    await enqueue(driver, scoped, ORG)
    assert (await attempt(driver, scoped)).outcome == "completed"
    assert seen == [None, "org-1"]

    unscoped = declare(
        tmp_path, source, name="orders.everyone", tenant="none", retry={"attempts": 1}
    )
    await enqueue(driver, unscoped, {"org_id": "all", "export_id": "e2"})
    done = await attempt(driver, unscoped)
    assert (done.outcome, done.code) == ("dead-lettered", "X_JOB_MAX_ATTEMPTS")
    assert isinstance(done.error, JobMaxAttemptsError)
    assert isinstance(done.error.__cause__, TenancyActorOrgRequiredError)


def test_rate_has_no_default_and_a_declared_rate_is_kept(tmp_path: Path) -> None:
    plain = declare(tmp_path, numbered(1))
    paced = declare(tmp_path, numbered(1), name="orders.paced", rate=500)
    assert export_of(plain).rate is None  # type: ignore[union-attr]
    assert export_of(paced).rate == 500.0  # type: ignore[union-attr]


async def test_the_export_runs_on_the_exports_queue_and_dedupes_on_its_prefix(
    tmp_path: Path,
) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(1))
    assert handle.queue == "exports"
    first = await driver.enqueue(handle.request(ORG, clock=driver.clock))
    again = await driver.enqueue(handle.request(ORG, clock=driver.clock))
    assert again.deduped
    assert again.id == first.id


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("columns", []),
        ("columns", ["id", "id"]),
        ("columns", "id"),
        ("format", "xlsx"),
        ("batch", 0),
        ("max_part_bytes", True),
        ("rate", 0),
        ("rate", "fast"),
        ("prefix", "exports/all"),
        ("row", "identity"),
        ("sink", "s3://bucket"),
    ],
)
def test_a_bad_declaration_is_refused_where_it_is_written(
    tmp_path: Path, option: str, value: Any
) -> None:
    with pytest.raises(JobDeclarationInvalidError) as caught:
        declare(tmp_path, numbered(1), **{option: value})
    assert caught.value.code == "X_JOB_DECLARATION_INVALID"


def test_a_source_that_is_not_a_function_is_refused(tmp_path: Path) -> None:
    with pytest.raises(JobDeclarationInvalidError):
        declare(tmp_path, "orders")


async def test_a_prefix_that_escapes_its_store_is_refused(tmp_path: Path) -> None:
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(1), prefix=lambda i: f"../{i.org_id}")
    with pytest.raises(Exception) as caught:
        await enqueue(driver, handle, ORG)
    assert getattr(caught.value, "code", None) == "X_INPUT_INVALID"


async def test_a_declared_rate_paces_the_read_after_every_page(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paced: list[tuple[float, int]] = []

    class Recorded(RowRate):
        async def read(self, rows: int) -> float:
            paced.append((self.rows_per_s, rows))
            return 0.0

    monkeypatch.setattr("ujobs.exports.family.RowRate", Recorded)
    driver = frozen_driver()
    handle = declare(tmp_path, numbered(25), rate=200)
    await enqueue(driver, handle, ORG)
    assert (await attempt(driver, handle)).outcome == "completed"
    assert paced == [(200.0, 10), (200.0, 10), (200.0, 5)]
    plain = declare(tmp_path, numbered(5), name="orders.unpaced", prefix=lambda i: "other")
    await enqueue(driver, plain, ORG)
    assert (await attempt(driver, plain)).outcome == "completed"
    assert len(paced) == 3
