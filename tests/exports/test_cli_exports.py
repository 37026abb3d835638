"""``ujobs exports list | show | get`` against a real Postgres and a filesystem store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    assert "no: the manifest is not written yet" in text.stdout


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
