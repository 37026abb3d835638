"""bench/throughput.py's line (ratios, targets, what a run did not finish) and
bench/harness_run.py's run, notes and lock — without running a benchmark."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1]


def load(name: str) -> ModuleType:
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    return importlib.import_module(name)


def harness_line(
    single: float, batch: float | None, drain: float, median: float, **kw: Any
) -> dict[str, Any]:
    n = kw.pop("n", 20_000)
    completed = kw.pop("completed", n)
    return {
        "peer": "x",
        "version": "1.0",
        "backend": "postgres",
        "enqueue_single_per_s": single,
        "enqueue_single_n": kw.pop("single_n", n),
        "enqueue_batch_per_s": batch,
        "drain": {
            "backlog": n,
            "completed": completed,
            "complete": completed >= n,
            "jobs_per_s": drain,
            "steady_jobs_per_s": drain * 1.1,
            "duplicate_runs": 0,
        },
        "latency": {"median_ms": median, "p95_ms": median * 2, "n": 100},
        "errors": kw.pop("errors", []),
        **kw,
    }


def test_ratios_and_targets_are_ours_over_theirs() -> None:
    tp = load("throughput")
    ours = {
        "postgres": harness_line(3_000, 40_000, 2_400, 4.0),
        "postgres_history": harness_line(
            2_900, 39_000, 2_000, 4.0, bench_notes=[{"history_s": 9.5}]
        ),
        "redis": harness_line(4_000, 60_000, 2_500, 3.0),
    }
    peers = {
        "pgqueuer": harness_line(1_000, 20_000, 1_000, 6.0),
        "dramatiq": harness_line(2_000, None, 1_250, 20.0),
        "saq": harness_line(2_000, None, 600, 3.5),
    }
    floor = {
        "bench": "commit_floor",
        "insert_commit_us": 400.0,
        "durable_single_ceiling_per_s": 2_500.0,
        "enqueue_statement_ceiling_per_s": 2_000.0,
    }
    cpu = {
        "bench": "worker_drain_micro",
        "jobs_per_s": 2_600.0,
        "worker_cpu_ms_per_job": 0.3,
        "postgres_cpu_ms_per_job": 0.5,
    }
    line = tp.summarise(ours, peers, floor, cpu)
    r = line["ratios"]
    # The cores / (0.3 + 0.5 ms) ceiling beside pgqueuer's drain and our steady one.
    cores = line["drain_cpu"]["cores"]
    assert line["drain_cpu"]["ceiling_per_s"] == round(cores * 1000 / 0.8, 1)
    assert r["drain_cpu_ceiling_vs_pgqueuer"] == round(cores * 1000 / 0.8 / 1_000, 2)
    assert r["drain_steady_vs_cpu_ceiling"] == round(2_400 * 1.1 / (cores * 1000 / 0.8), 2)
    assert r["durable_single_ceiling_vs_pgqueuer"] == 2.5
    assert r["enqueue_statement_ceiling_vs_pgqueuer"] == 2.0
    assert line["floor"] == {
        "insert_commit_us": 400.0,
        "durable_single_ceiling_per_s": 2_500.0,
        "enqueue_statement_ceiling_per_s": 2_000.0,
    }
    assert r["drain_vs_pgqueuer"] == 2.4
    assert r["enqueue_batch_vs_pgqueuer"] == 2.0
    assert r["enqueue_single_vs_pgqueuer"] == 3.0
    assert r["drain_history_vs_none"] == 0.83
    assert r["redis_drain_vs_dramatiq"] == 2.0
    assert r["redis_latency_median_vs_saq"] == 0.86
    assert r["drain_vs_procrastinate"] is None  # procrastinate did not run
    t = line["targets"]
    assert t["drain_vs_pgqueuer"] == {"at_least": 2.0, "value": 2.4, "met": True}
    assert t["drain_history_vs_none"]["met"] is False
    assert t["redis_latency_median_vs_saq"] == {"at_most": 1.0, "value": 0.86, "met": True}
    assert line["drain_per_s_with_history"] == 2_000
    assert line["history_setup_s"] == 9.5
    assert line["redis"]["drain_per_s"] == 2_500
    assert line["peers"]["saq"]["enqueue_batch_per_s"] is None
    assert line["errors"] == []


def test_a_run_cut_short_says_what_it_did_not_finish() -> None:
    tp = load("throughput")
    ours = {"postgres": harness_line(3_000, 40_000, 2_400, 4.0)}
    peers = {
        "rq": harness_line(1_000, 3_000, 30, 50.0, completed=6_000, errors=["Budget: aborted"]),
        "arq": {"errors": ["no answer within 420 s"]},
        "celery": harness_line(700, None, 300, 5.0, single_n=15_000),
    }
    line = tp.summarise(ours, peers)
    errors = line["errors"]
    assert "ultimate-jobs postgres_history: did not run" in errors
    assert "ultimate-jobs redis: did not run" in errors
    assert "rq: Budget: aborted" in errors
    assert any(e.startswith("rq: drain incomplete, 6000 of 20000") for e in errors)
    assert "arq: no answer within 420 s" in errors
    assert "commit floor: did not run" in errors
    assert "drain cpu: did not run" in errors
    assert line["ratios"]["drain_cpu_ceiling_vs_pgqueuer"] is None
    assert line["ratios"]["durable_single_ceiling_vs_pgqueuer"] is None
    assert line["ratios"]["enqueue_statement_ceiling_vs_pgqueuer"] is None
    assert "arq: no drain figure" in errors
    assert any(e.startswith("celery: single enqueue stopped at 15000") for e in errors)
    assert line["ratios"]["drain_history_vs_none"] is None
    assert line["targets"]["drain_history_vs_none"]["met"] is None
    assert line["peers"]["rq"]["drain_complete"] is False


def round_line(single: float, drain: float, pgq_single: float, *, errors: list[str]) -> Any:
    """One round's line: ours with the given single enqueue and drain, pgqueuer at 1,000/s."""
    tp = load("throughput")
    ours = {
        "postgres": harness_line(single, 40_000, drain, 4.0, errors=errors),
        "postgres_history": harness_line(single, 40_000, drain, 4.0),
        "redis": harness_line(4_000, 60_000, 2_500, 3.0),
    }
    peers = {"pgqueuer": harness_line(pgq_single, 20_000, 1_000, 6.0)}
    floor = {"insert_commit_us": 400.0, "durable_single_ceiling_per_s": 2_500.0}
    cpu = {"worker_cpu_ms_per_job": 0.3, "postgres_cpu_ms_per_job": 0.5}
    return tp.summarise(ours, peers, floor, cpu)


def test_rounds_combine_into_medians_of_figures_and_of_each_rounds_ratios() -> None:
    tp = load("throughput")
    lines = [
        round_line(1_500, 2_400, 1_000, errors=[]),  # single ratio 1.5
        round_line(3_000, 1_800, 3_000, errors=["slow"]),  # 1.0: pgqueuer had a fast spell
        round_line(1_600, 2_100, 1_000, errors=[]),  # 1.6
    ]
    line = tp.combine(lines)
    # The ratio is the median of the rounds' ratios (1.0, 1.5, 1.6), not the ratio of the
    # median figures (1,600 / 1,000).
    assert line["ratios"]["enqueue_single_vs_pgqueuer"] == 1.5
    assert line["enqueue_single_per_s"] == 1_600
    assert line["peers"]["pgqueuer"]["enqueue_single_per_s"] == 1_000
    assert line["drain_per_s"] == 2_100
    assert line["ratios"]["drain_vs_pgqueuer"] == 2.1
    assert line["targets"]["enqueue_single_vs_pgqueuer"] == {
        "at_least": 1.5,
        "value": 1.5,
        "met": True,
    }
    assert line["targets"]["drain_vs_pgqueuer"]["met"] is True
    assert line["n"] == 20_000
    assert line["floor"]["insert_commit_us"] == 400.0
    assert line["drain_cpu"]["worker_cpu_ms_per_job"] == 0.3
    assert [r["ratios"]["enqueue_single_vs_pgqueuer"] for r in line["rounds"]] == [1.5, 1.0, 1.6]
    assert [r["drain_per_s"] for r in line["rounds"]] == [2_400, 1_800, 2_100]
    assert line["errors"] == ["round 2: ultimate-jobs postgres: slow"]
    assert tp.combine(lines[:1]) == lines[0]  # one round: its own line, unchanged


def test_run_harness_answers_the_last_json_line_and_the_notes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hr = load("harness_run")
    (tmp_path / "common.py").write_text("")
    monkeypatch.setenv("UJOBS_PEERS_DIR", str(tmp_path))
    script = (
        "import sys; print('noise'); print('{\"a\": 1}'); print('{\"a\": 2}');"
        "print('bench-note {\"history_s\": 3.5}', file=sys.stderr)"
    )
    result = hr.run_harness([sys.executable, "-c", script], {}, 30, lock=False)
    assert result == {"a": 2, "bench_notes": [{"history_s": 3.5}]}
    failed = hr.run_harness([sys.executable, "-c", "raise SystemExit(3)"], {}, 30)
    assert failed["errors"][0].startswith("rc=3, no JSON")
    slow = hr.run_harness([sys.executable, "-c", "import time; time.sleep(5)"], {}, 0.5)
    assert slow == {"errors": ["no answer within 0.5 s"]}


def test_the_bench_lock_is_held_for_the_run_and_released_after(tmp_path: Path) -> None:
    hr = load("harness_run")
    lock = tmp_path / "bench.lock"

    def other_can_take_it() -> bool:
        probe = subprocess.run(["flock", "-n", str(lock), "true"], check=False)
        return probe.returncode == 0

    with hr.bench_lock(lock):
        assert not other_can_take_it()
    assert other_can_take_it()
