"""``ujobs exports list | show | get`` against a real Postgres and a filesystem store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.exports.export_app.failing import broken_export
from tests.exports.export_app.jobs import expected_csv, orders_export
from tests.exports.kit import attempt, enqueue
from tests.support.cli import json_of, ujobs, ujobs_process, with_driver
from ujobs.drivers.postgres import PostgresDriver
from ujobs.exports.sinks import filesystem_sink, set_default_sink

APP = "tests.exports.export_app:api"


def order(export_id: str, rows: int = 25) -> dict[str, Any]:
    return {"org_id": "org-1", "export_id": export_id, "rows": rows, "slow_ms": 0}


def exported(dsn: str, store: Path, export_id: str, rows: int = 25, *, run: bool = True) -> str:
    """Queue (and run, in this process, writing to ``store``) one export."""
    set_default_sink(filesystem_sink(store))

    async def work(driver: PostgresDriver) -> str:
        job_id = await enqueue(driver, orders_export, order(export_id, rows))
        if run:
            done = await attempt(driver, orders_export)
            assert done.outcome == "completed", done.error
        return job_id

    return with_driver(dsn, work)


def env(store: Path) -> dict[str, str]:
    return {"UJOBS_APP": APP, "UJOBS_EXPORT_URL": str(store)}


def test_get_downloads_every_part_into_one_file(pg_dsn: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    job_id = exported(pg_dsn, store, "e1", rows=95)
    target = tmp_path / "orders.csv"
    result = ujobs("exports", "get", job_id, "-o", str(target), dsn=pg_dsn, env=env(store))
    assert result.exit_code == 0, result.output
    assert target.read_bytes() == expected_csv(95)
    assert "part 10 of 10 downloaded" in result.stderr
    assert not list(tmp_path.glob(".orders.csv.part"))


def test_get_to_stdout_and_as_json(pg_dsn: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    job_id = exported(pg_dsn, store, "e1", rows=12)
    result = ujobs("exports", "get", job_id, "-o", "-", dsn=pg_dsn, env=env(store))
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == expected_csv(12)
    target = tmp_path / "x.csv"
    result = ujobs(
        "exports", "get", job_id, "-o", str(target), "--json", dsn=pg_dsn, env=env(store)
    )
    assert json_of(result) == {
        "id": job_id,
        "output": str(target),
        "parts": 2,
        "bytes": len(expected_csv(12)),
    }


def test_get_of_an_unfinished_export_says_so_and_writes_nothing(
    pg_dsn: str, tmp_path: Path
) -> None:
    job_id = exported(pg_dsn, tmp_path, "e1", run=False)
    target = tmp_path / "orders.csv"
    result = ujobs(
        "exports", "get", job_id, "-o", str(target), "--json", dsn=pg_dsn, env=env(tmp_path)
    )
    assert result.exit_code == 1
    error = json_of(result)["error"]
    assert error["code"] == "X_EXPORT_NOT_FOUND"
    assert "has not finished" in error["message"]
    assert not target.exists()


def test_list_and_show(pg_dsn: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    done = exported(pg_dsn, store, "e1")
    waiting = exported(pg_dsn, store, "e2", run=False)
    listed = json_of(ujobs("exports", "list", "--json", dsn=pg_dsn, env=env(store)))
    assert [j["id"] for j in listed["jobs"]] == [waiting, done]
    shown = json_of(ujobs("exports", "show", done, "--json", dsn=pg_dsn, env=env(store)))
    assert shown["ready"] is True
    assert shown["manifest"]["rows"] == 25
    assert len(shown["parts"]) == 3
    text = ujobs("exports", "show", waiting, dsn=pg_dsn, env=env(store))
    assert text.exit_code == 0, text.output
    assert "no: its job is ready; the manifest is written last" in text.stdout


def test_show_of_an_unknown_export_is_x_export_not_found(pg_dsn: str, tmp_path: Path) -> None:
    result = ujobs(
        "exports",
        "show",
        "01a2437c-0000-7000-8000-000000000000",
        "--json",
        dsn=pg_dsn,
        env=env(tmp_path),
    )
    assert result.exit_code == 1
    assert json_of(result)["error"]["code"] == "X_EXPORT_NOT_FOUND"


def test_get_as_a_process_prints_plain_progress_lines_off_a_terminal(
    pg_dsn: str, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    job_id = exported(pg_dsn, store, "e1", rows=25)
    target = tmp_path / "orders.csv"
    done = ujobs_process(
        "exports", "get", job_id, "-o", str(target), env={"DATABASE_URL": pg_dsn, **env(store)}
    )
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == expected_csv(25)
    assert [line for line in done.stderr.splitlines() if "downloaded" in line] == [
        f"ujobs: part {i} of 3 downloaded" for i in (1, 2, 3)
    ]


def test_get_on_a_terminal_shows_a_progress_bar_instead_of_lines(
    pg_dsn: str, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    job_id = exported(pg_dsn, store, "e1", rows=25)
    target = tmp_path / "orders.csv"
    done = ujobs_process(
        "exports",
        "get",
        job_id,
        "-o",
        str(target),
        env={"DATABASE_URL": pg_dsn, "TTY_COMPATIBLE": "1", **env(store)},
    )
    assert done.returncode == 0, done.stderr
    assert target.read_bytes() == expected_csv(25)
    assert "downloading" in done.stderr
    assert "\x1b[" in done.stderr  # drawn with terminal control codes
    assert "downloaded" not in done.stderr


def dead_export(dsn: str) -> str:
    async def work(driver: PostgresDriver) -> str:
        job_id = await enqueue(driver, broken_export, {"org_id": "org-1", "export_id": "b1"})
        assert (await attempt(driver, broken_export)).outcome == "dead-lettered"
        return job_id

    return with_driver(dsn, work)


def test_show_of_a_dead_export_prints_why_it_will_not_finish(pg_dsn: str, tmp_path: Path) -> None:
    job_id = dead_export(pg_dsn)
    text = ujobs("exports", "show", job_id, dsn=pg_dsn, env=env(tmp_path))
    assert text.exit_code == 0, text.output
    assert "the manifest is not written yet" not in text.stdout
    assert "no: the export is dead and will not finish" in text.stdout
    assert "last error\n  X_EXPORT_TENANCY_UNDECLARED: keyset('orders')" in text.stdout
    assert "Traceback" in text.stdout  # the operator's view: the stack too
    shown = json_of(ujobs("exports", "show", job_id, "--json", dsn=pg_dsn, env=env(tmp_path)))
    assert shown["state"] == "dead"
    assert shown["lastError"].startswith("X_EXPORT_TENANCY_UNDECLARED: ")
    got = ujobs("exports", "get", job_id, "-o", str(tmp_path / "x.csv"), "--json", dsn=pg_dsn,
                env=env(tmp_path))  # fmt: skip
    assert got.exit_code == 1
    error = json_of(got)["error"]
    assert error["code"] == "X_EXPORT_NOT_FOUND"
    assert "is dead and will never finish (X_EXPORT_TENANCY_UNDECLARED: " in error["message"]


def test_show_and_get_take_any_unique_start_of_an_id(pg_dsn: str, tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = exported(pg_dsn, store, "e1", rows=12)
    second = exported(pg_dsn, store, "e2", rows=12, run=False)
    shared = next(i for i in range(36) if first[i] != second[i])
    unique = first[: shared + 1]
    shown = json_of(ujobs("exports", "show", unique, "--json", dsn=pg_dsn, env=env(store)))
    assert (shown["id"], shown["ready"]) == (first, True)
    target = tmp_path / "short.csv"
    got = ujobs("exports", "get", unique, "-o", str(target), dsn=pg_dsn, env=env(store))
    assert got.exit_code == 0, got.output
    assert target.read_bytes() == expected_csv(12)
    both = ujobs("exports", "show", first[:shared], "--json", dsn=pg_dsn, env=env(store))
    assert both.exit_code == 1
    assert json_of(both)["error"]["code"] == "X_JOB_ID_AMBIGUOUS"
    none = ujobs("exports", "show", "ffffffff", "--json", dsn=pg_dsn, env=env(store))
    assert none.exit_code == 1
    assert json_of(none)["error"] == {
        "code": "X_EXPORT_NOT_FOUND",
        "message": "no export's id starts with 'ffffffff'; `ujobs exports list` shows them",
        "meta": {"id": "ffffffff"},
    }
