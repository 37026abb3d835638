"""Enqueue and drain throughput, ours beside the peers, in one run: prints ONE JSON line.

    /work/venv/bin/python bench/throughput.py
    BENCH_PEERS="pgqueuer dramatiq" BENCH_N=5000 /work/venv/bin/python bench/throughput.py

Every figure comes from the peers' own harness (``shared/bench/peers/common.py``): each adapter —
ours, ``bench/bench_ujobs.py``, and each peer's ``bench_<peer>.py`` in its own venv — runs as one
subprocess and reports its enqueue phases (``BENCH_N`` jobs, default 20,000: one call at a
time, and in batches of 500 where the library has a bulk API), its drain (those jobs, left
queued, run by ONE worker process at concurrency 16, no-op bodies; the rate is over the wall
time from the worker's spawn to the last body's start, so it includes the worker's start-up)
and its pickup latency (``BENCH_LAT_N``, the harness's default 100, jobs 50 ms apart).

The runs, in order (each says so on stderr first):

1. ours on Postgres — the default deployment: the Postgres driver, the Redis wake;
2. the same with ``BENCH_HISTORY`` (default 1,000,000) finished rows in ``x_jobs``
   (``BENCH_UJOBS_HISTORY``: every setup of that run inserts them and VACUUM ANALYZEs the
   table), for ``drain_per_s_with_history`` (issue 4: within 10 % of the drain without);
3. ours on the Redis driver (``BENCH_UJOBS_DRIVER=redis``): the ``redis`` object (issue 8);
4. the peers (``BENCH_PEERS``, default pgqueuer and procrastinate on Postgres, dramatiq, saq,
   arq, celery and rq on Redis); a missing peer venv is built by ``setup_venvs.sh`` first;
5. ``bench/commit_floor.py``: a bare one-column INSERT, awaited one at a time, the durable
   floor of ANY single enqueue on this server (``floor``). ``durable_single_ceiling_vs_pgqueuer``
   is that ceiling over pgqueuer's single enqueue: the most the single-enqueue ratio could be
   here without trading durability (issue 4 asks 1.5). The same script sends our own enqueue
   statement alone, in turn with the floor's INSERT: ``enqueue_statement_ceiling_vs_pgqueuer``
   is the most OUR single enqueue could reach if the client cost nothing.
6. ``bench/worker_drain_micro.py`` at the same ``BENCH_N`` and 16 slots (``drain_cpu``): the CPU
   a drained no-op job costs the worker process and its Postgres backends, and from them
   ``ceiling_per_s``, the most jobs a second this machine's cores could drain if they did
   nothing else (cores / both figures' sum). ``drain_cpu_ceiling_vs_pgqueuer`` is that ceiling
   over pgqueuer's drain: the most the drain ratio could be here at this CPU a job (issue 39
   asks 3 at least); ``drain_steady_vs_cpu_ceiling`` is how near our own steady drain comes.

Each run holds the bench lock (``/tmp/ujobs-bench.lock``) for itself only, so do NOT wrap this
command in ``flock`` (see ``bench/harness_run.py``). The harness's budget is
``BENCH_BUDGET_S`` (default 300 s; its own default, 120 s, is too short for the slow peers at
20,000 jobs) and each subprocess gets 120 s more than that. A run that hits its budget reports
the figures of what it finished, and ``errors`` says which (e.g. a drain that completed 6,000
of 20,000 jobs: its rate is over those).

``ratios`` are ours over theirs (latency: ours over theirs too, so lower is better), and
``targets`` holds each target beside its ratio and whether this run met it. Figures are noisy
on a shared 2-core machine: compare the ratios within one line, not figures across runs.

``BENCH_ROUNDS`` (default 1) runs all of the above that many times in one invocation and prints
one line: each figure the median over the rounds, each ratio the median of the rounds' own
ratios, the targets judged on those, and ``rounds`` with every round's ratios and headline
figures. On a machine whose speed drifts by tens of percent from minute to minute (this one,
some days), one round's ratio can swing by half; three rounds take ~10 minutes.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness_run import (
    ensure_venvs,
    harness_env,
    ours_argv,
    peer_argv,
    peer_python,
    run_harness,
    wanted_peers,
)

N_JOBS = int(os.environ.get("BENCH_N", "20000"))
HISTORY = int(os.environ.get("BENCH_HISTORY", "1000000"))
BUDGET_S = int(os.environ.get("BENCH_BUDGET_S", "300"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "1"))
TIMEOUT_S = BUDGET_S + 120
SLOTS = 16
FLOOR_SCRIPT = Path(__file__).resolve().with_name("commit_floor.py")
CPU_SCRIPT = Path(__file__).resolve().with_name("worker_drain_micro.py")
ALL_PEERS = ("pgqueuer", "procrastinate", "dramatiq", "saq", "arq", "celery", "rq")

# ratio name -> (at_least, at_most): issue 4 (Postgres) and issue 8 (Redis).
TARGETS: dict[str, tuple[float | None, float | None]] = {
    "drain_vs_pgqueuer": (2.0, None),
    "enqueue_batch_vs_pgqueuer": (1.0, None),
    "enqueue_single_vs_pgqueuer": (1.5, None),
    "drain_history_vs_none": (0.9, None),
    "redis_drain_vs_dramatiq": (1.5, None),
    "redis_latency_median_vs_saq": (None, 1.0),
}

OURS_RUNS: dict[str, dict[str, str]] = {
    "postgres": {},
    "postgres_history": {"BENCH_UJOBS_HISTORY": str(HISTORY)},
    "redis": {"BENCH_UJOBS_DRIVER": "redis"},
}


def figures(result: dict[str, Any]) -> dict[str, Any]:
    """One harness line boiled down to the figures this bench reports."""
    drain = result.get("drain") or {}
    latency = result.get("latency") or {}
    out: dict[str, Any] = {
        "version": result.get("version"),
        "backend": result.get("backend"),
        "enqueue_single_per_s": result.get("enqueue_single_per_s"),
        "enqueue_batch_per_s": result.get("enqueue_batch_per_s"),
        "drain_per_s": drain.get("jobs_per_s"),
        "drain_steady_per_s": drain.get("steady_jobs_per_s"),
        "drain_completed": drain.get("completed"),
        "drain_complete": drain.get("complete"),
        "drain_duplicate_runs": drain.get("duplicate_runs"),
        "latency_median_ms": latency.get("median_ms"),
        "latency_p95_ms": latency.get("p95_ms"),
        "latency_n": latency.get("n"),
        "elapsed_s": result.get("elapsed_s"),
    }
    for note in result.get("bench_notes", []):
        out.update(note)
    if result.get("errors"):
        out["errors"] = list(result["errors"])
    return out


def shortfalls(label: str, result: dict[str, Any]) -> list[str]:
    """What a run did not finish, each as a sentence naming the run."""
    out = [f"{label}: {error}" for error in result.get("errors", [])]
    single_n = result.get("enqueue_single_n")
    if single_n is not None and single_n < N_JOBS:
        out.append(f"{label}: single enqueue stopped at {single_n} of {N_JOBS} (budget)")
    batch_n = result.get("enqueue_batch_n")
    if batch_n is not None and batch_n < N_JOBS:
        out.append(f"{label}: batch enqueue stopped at {batch_n} of {N_JOBS} (budget)")
    drain = result.get("drain")
    if drain is None:
        out.append(f"{label}: no drain figure")
    elif not drain.get("complete"):
        out.append(
            f"{label}: drain incomplete, {drain.get('completed')} of {drain.get('backlog')} jobs "
            "within the budget (the rate is over those)"
        )
    if drain is not None and drain.get("duplicate_runs"):
        out.append(f"{label}: {drain['duplicate_runs']} duplicate runs in the drain")
    return out


def ratio(ours: Any, theirs: Any) -> float | None:
    if not isinstance(ours, int | float) or not isinstance(theirs, int | float) or not theirs:
        return None
    return round(ours / theirs, 2)


def judge(ratios: dict[str, float | None]) -> dict[str, Any]:
    """Each target beside its ratio, and whether the ratio meets it (None: no ratio)."""
    targets: dict[str, Any] = {}
    for name, (at_least, at_most) in TARGETS.items():
        value = ratios[name]
        target: dict[str, Any] = {}
        if at_least is not None:
            target["at_least"] = at_least
        if at_most is not None:
            target["at_most"] = at_most
        target["value"] = value
        target["met"] = (
            None
            if value is None
            else (at_least is None or value >= at_least) and (at_most is None or value <= at_most)
        )
        targets[name] = target
    return targets


def drain_cpu(micro: dict[str, Any]) -> dict[str, Any]:
    """``bench/worker_drain_micro.py``'s line boiled down to the CPU a drained job costs each
    side and the drain those costs allow on this machine's cores."""
    if micro.get("errors"):
        return {"errors": list(micro["errors"])}
    worker, server = micro.get("worker_cpu_ms_per_job"), micro.get("postgres_cpu_ms_per_job")
    cores = os.cpu_count() or 1
    return {
        "jobs_per_s": micro.get("jobs_per_s"),
        "worker_cpu_ms_per_job": worker,
        "postgres_cpu_ms_per_job": server,
        "cores": cores,
        "ceiling_per_s": round(cores * 1000 / (worker + server), 1) if worker and server else None,
    }


def summarise(
    ours: dict[str, dict[str, Any]],
    peers: dict[str, dict[str, Any]],
    floor: dict[str, Any] | None = None,
    cpu: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The one JSON line, from the harness lines of our runs (keys of ``OURS_RUNS``), the
    peers' (by name), ``bench/commit_floor.py``'s and ``bench/worker_drain_micro.py``'s; a run
    missing from any is reported as an error, its ratios null."""
    errors: list[str] = []
    floor = floor or {"errors": ["did not run"]}
    errors.extend(f"commit floor: {error}" for error in floor.get("errors", []))
    ceiling = drain_cpu(cpu or {"errors": ["did not run"]})
    errors.extend(f"drain cpu: {error}" for error in ceiling.get("errors", []))
    mine: dict[str, dict[str, Any]] = {}
    for name in OURS_RUNS:
        result = ours.get(name, {"errors": ["did not run"]})
        mine[name] = figures(result)
        errors.extend(shortfalls(f"ultimate-jobs {name}", result))
    theirs: dict[str, dict[str, Any]] = {}
    for name, result in peers.items():
        theirs[name] = figures(result)
        errors.extend(shortfalls(name, result))
    pg, hist, redis = mine["postgres"], mine["postgres_history"], mine["redis"]
    pgq = theirs.get("pgqueuer", {})
    ratios = {
        "drain_vs_pgqueuer": ratio(pg["drain_per_s"], pgq.get("drain_per_s")),
        "enqueue_batch_vs_pgqueuer": ratio(
            pg["enqueue_batch_per_s"], pgq.get("enqueue_batch_per_s")
        ),
        "enqueue_single_vs_pgqueuer": ratio(
            pg["enqueue_single_per_s"], pgq.get("enqueue_single_per_s")
        ),
        "drain_vs_procrastinate": ratio(
            pg["drain_per_s"], theirs.get("procrastinate", {}).get("drain_per_s")
        ),
        "drain_history_vs_none": ratio(hist["drain_per_s"], pg["drain_per_s"]),
        "redis_drain_vs_dramatiq": ratio(
            redis["drain_per_s"], theirs.get("dramatiq", {}).get("drain_per_s")
        ),
        "redis_drain_vs_saq": ratio(redis["drain_per_s"], theirs.get("saq", {}).get("drain_per_s")),
        "redis_latency_median_vs_saq": ratio(
            redis["latency_median_ms"], theirs.get("saq", {}).get("latency_median_ms")
        ),
        "durable_single_ceiling_vs_pgqueuer": ratio(
            floor.get("durable_single_ceiling_per_s"), pgq.get("enqueue_single_per_s")
        ),
        "enqueue_statement_ceiling_vs_pgqueuer": ratio(
            floor.get("enqueue_statement_ceiling_per_s"), pgq.get("enqueue_single_per_s")
        ),
        "drain_cpu_ceiling_vs_pgqueuer": ratio(
            ceiling.get("ceiling_per_s"), pgq.get("drain_per_s")
        ),
        "drain_steady_vs_cpu_ceiling": ratio(
            pg["drain_steady_per_s"], ceiling.get("ceiling_per_s")
        ),
    }
    targets = judge(ratios)
    redis_figures = {k: v for k, v in redis.items() if k != "version"}
    return {
        "bench": "throughput",
        "n": N_JOBS,
        "slots": SLOTS,
        "budget_s": BUDGET_S,
        "version": pg["version"],
        "backend": pg["backend"],
        "enqueue_single_per_s": pg["enqueue_single_per_s"],
        "enqueue_batch_per_s": pg["enqueue_batch_per_s"],
        "drain_per_s": pg["drain_per_s"],
        "drain_steady_per_s": pg["drain_steady_per_s"],
        "latency_median_ms": pg["latency_median_ms"],
        "history_rows": HISTORY,
        "history_setup_s": hist.get("history_s"),
        "drain_per_s_with_history": hist["drain_per_s"],
        "drain_steady_per_s_with_history": hist["drain_steady_per_s"],
        "enqueue_single_per_s_with_history": hist["enqueue_single_per_s"],
        "enqueue_batch_per_s_with_history": hist["enqueue_batch_per_s"],
        "redis": redis_figures,
        "floor": {k: v for k, v in floor.items() if k != "bench"},
        "drain_cpu": ceiling,
        "peers": theirs,
        "ratios": ratios,
        "targets": targets,
        "errors": errors,
    }


def source_commit() -> str | None:
    """The commit of the tree this bench runs from, ``+dirty`` when it has changes."""
    root = Path(__file__).resolve().parents[1]
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], cwd=root, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return None
    return f"{sha}+dirty" if sha and dirty else sha or None


def _median(values: list[Any]) -> Any:
    """The median of the numbers among ``values`` (None when there are none)."""
    numbers = [v for v in values if isinstance(v, int | float) and not isinstance(v, bool)]
    return round(statistics.median(numbers), 2) if numbers else None


def _median_fields(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """``rows[0]`` with each numeric field replaced by its median over ``rows``."""
    return {
        key: _median([row.get(key) for row in rows])
        if isinstance(value, int | float) and not isinstance(value, bool)
        else value
        for key, value in rows[0].items()
    }


ROUND_FIGURES = (
    "enqueue_single_per_s",
    "enqueue_batch_per_s",
    "drain_per_s",
    "drain_per_s_with_history",
)


def combine(lines: list[dict[str, Any]]) -> dict[str, Any]:
    """One line from several rounds' lines: each figure is its median over the rounds, and
    each ratio the median of the rounds' own ratios (each round compares ours with the peers
    run minutes apart, so a slow spell of the machine cancels out within the round). The
    targets are judged on those median ratios; ``rounds`` keeps every round's ratios and
    headline figures, and each error says its round."""
    if len(lines) == 1:
        return lines[0]
    out = _median_fields(lines)
    for key in ("n", "slots", "budget_s", "history_rows"):
        out[key] = lines[0][key]
    out["redis"] = _median_fields([line["redis"] for line in lines])
    out["floor"] = _median_fields([line["floor"] for line in lines])
    out["drain_cpu"] = _median_fields([line["drain_cpu"] for line in lines])
    out["peers"] = {
        peer: _median_fields([line["peers"].get(peer, {}) for line in lines])
        for peer in lines[0]["peers"]
    }
    out["ratios"] = {
        name: _median([line["ratios"][name] for line in lines]) for name in lines[0]["ratios"]
    }
    out["targets"] = judge(out["ratios"])
    out["errors"] = [
        f"round {index}: {error}" for index, line in enumerate(lines, 1) for error in line["errors"]
    ]
    out["rounds"] = [
        {"ratios": line["ratios"], **{key: line[key] for key in ROUND_FIGURES}} for line in lines
    ]
    return out


def one_round(tag: str, peers: list[str], label: str) -> dict[str, Any]:
    """Our three runs, the peers' and the floor, summarised into one line."""
    settings = {"BENCH_N": str(N_JOBS), "BENCH_BUDGET_S": str(BUDGET_S)}
    total = len(OURS_RUNS) + len(peers)
    step = 0
    ours: dict[str, dict[str, Any]] = {}
    for name, extra in OURS_RUNS.items():
        step += 1
        print(
            f"throughput{label}: ultimate-jobs {name} ({step}/{total})", file=sys.stderr, flush=True
        )
        env = harness_env(f"{tag}_ujobs_{name}", settings | extra)
        ours[name] = run_harness(ours_argv(), env, TIMEOUT_S, lock=True)
    results: dict[str, dict[str, Any]] = {}
    for peer in peers:
        step += 1
        python = peer_python(peer)
        if not python.exists():
            results[peer] = {"errors": [f"no venv at {python.parent.parent}"]}
            continue
        print(f"throughput{label}: {peer} ({step}/{total})", file=sys.stderr, flush=True)
        env = harness_env(f"{tag}_{peer}", settings)
        results[peer] = run_harness(peer_argv(peer), env, TIMEOUT_S, lock=True)
    print(f"throughput{label}: commit floor", file=sys.stderr, flush=True)
    floor = run_harness([sys.executable, str(FLOOR_SCRIPT)], dict(os.environ), 120, lock=True)
    print(f"throughput{label}: the drain's CPU a job", file=sys.stderr, flush=True)
    micro_env = dict(os.environ) | {
        "BENCH_N": str(N_JOBS),
        "BENCH_SLOTS": str(SLOTS),
        "BENCH_FLOOR": "0",
        "BENCH_HISTORY": "0",
    }
    micro_env.pop("BENCH_CLAIM_AHEAD", None)  # the worker's default, as the harness's drain
    cpu = run_harness([sys.executable, str(CPU_SCRIPT)], micro_env, TIMEOUT_S, lock=True)
    return summarise(ours, results, floor, cpu)


def main() -> None:
    if ROUNDS < 1:
        raise SystemExit(f"BENCH_ROUNDS must be at least 1: {ROUNDS}")
    tag = time.strftime("tput%Y%m%dT%H%M%S")
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    commit = source_commit()  # before the runs: the tree they run from
    peers = wanted_peers(ALL_PEERS)
    ensure_venvs(peers)
    lines = []
    for index in range(1, ROUNDS + 1):
        label = f" round {index}/{ROUNDS}" if ROUNDS > 1 else ""
        lines.append(one_round(f"{tag}_r{index}", peers, label))
    line = combine(lines)
    line["commit"] = commit
    line["date"] = started
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
