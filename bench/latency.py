"""Pickup latency and idle cost, beside the peers, in one run: prints ONE JSON line.

    /work/venv/bin/python bench/latency.py
    BENCH_PEERS="pgqueuer saq" BENCH_LAT_N=100 /work/venv/bin/python bench/latency.py

What it measures:

- **Pickup latency** from ANOTHER process's enqueue (its commit) to the job body's start, into an
  idle worker with the wake on: ``BENCH_LAT_N`` (default 300) jobs, 50 ms apart. Measured by the
  peers' own harness (``shared/bench/peers/common.py``) through our adapter
  ``bench/bench_ujobs.py``, so the producer process, the timestamps and the percentiles are the
  very ones the peers get. ``latency_*`` is the default deployment (the Postgres driver, the
  Redis wake, the announce throttled to once per queue per 10 ms slot: ``REDIS_WAKE_SLOT_MS``).
- **Variants of ours** (``BENCH_VARIANTS``, default all), each its own harness run:
  ``redis_driver`` — the Redis driver, its enqueue script announcing (issue 8's figure);
  ``postgres_wake`` — the LISTEN/NOTIFY alternative (the enqueue statement's ``pg_notify``,
  throttled to once per queue per 250 ms slot because a NOTIFY serialises commits: at 50 ms
  apart four jobs in five are announced by nobody and start on the woken loop's next pass);
  ``redis_wake_250ms_slot`` — the Redis wake throttled like the NOTIFY, to show what that
  slot costs at this pace; ``redis_wake_300ms_apart`` — jobs 300 ms apart, each in a slot of
  its own (80 jobs: the harness gives its producer 30 s); ``outbox`` — every enqueue staged
  in a transaction and published by the relay (below).
- **The peers' latency**, each peer's adapter run by the same harness in the same run
  (``peers``); a peer whose venv is missing is built by ``setup_venvs.sh`` first.
- **Idle claims per minute**: a separate idle worker (its own database, queue and wake channel,
  wake on) appends a line per claim statement; after ``BENCH_IDLE_SETTLE_S`` (15 s: the wait
  has doubled to its ceiling by then) claims are counted over at least ``BENCH_IDLE_WINDOW_S``
  (60 s). It idles while the latency runs go on, so the window costs no extra time.

The harness also runs its enqueue and drain phases for every adapter; this bench does not
report them and runs them small (``BENCH_N``, default 500) to save time.

The outbox's pickup (issue 6) is the ``outbox`` variant, lifted to the top level as
``outbox_latency_median_ms`` / ``outbox_latency_p95_ms`` (target: median under 10 ms): every
enqueue is staged inside a transaction of its own in the producer process, and the worker
process also runs the relay, woken by LISTEN ``x_outbox_wake`` on COMMIT. The clock starts
inside the transaction, just before the stage's INSERT, so the figure counts the INSERT and
the COMMIT — a little more than the spec's "from the COMMIT". Absent when ``BENCH_VARIANTS``
leaves the variant out.

Figures are noisy on a shared 2-core machine: compare ratios within one line, not absolute
figures across runs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from harness_run import (
    ADAPTER,
    PEERS_HOME,
    ensure_venvs,
    harness_env,
    ours_argv,
    peer_argv,
    peer_python,
    peers_dir,
    run_harness,
    wanted_peers,
)

HERE = Path(__file__).resolve().parent
N_LAT = int(os.environ.get("BENCH_LAT_N", "300"))
N_HARNESS = int(os.environ.get("BENCH_N", "500"))
IDLE_SETTLE_S = float(os.environ.get("BENCH_IDLE_SETTLE_S", "15"))
IDLE_WINDOW_S = float(os.environ.get("BENCH_IDLE_WINDOW_S", "60"))
ALL_PEERS = ("procrastinate", "pgqueuer", "oban", "celery", "arq", "rq", "dramatiq", "saq")
RUN_TIMEOUT_S = 170
VARIANTS: dict[str, dict[str, str]] = {
    "redis_driver": {"BENCH_UJOBS_DRIVER": "redis"},
    "postgres_wake": {"BENCH_UJOBS_WAKE": "postgres"},
    "redis_wake_250ms_slot": {"BENCH_UJOBS_SLOT_MS": "250"},
    "redis_wake_300ms_apart": {"BENCH_UJOBS_LAT_INTERVAL_S": "0.3", "BENCH_LAT_N": "80"},
    "outbox": {"BENCH_UJOBS_OUTBOX": "1"},
}
TARGETS = {
    "latency_median_ms": 5.0,
    "latency_p95_ms": 10.0,
    "idle_claims_per_min": 12.0,
    "outbox_latency_median_ms": 10.0,
}


PEERS_DIR = peers_dir()


def base_env(tag: str) -> dict[str, str]:
    return harness_env(tag, {"BENCH_LAT_N": str(N_LAT), "BENCH_N": str(N_HARNESS)})


def latency_of(result: dict[str, Any]) -> dict[str, Any]:
    lat = result.get("latency") or {}
    out: dict[str, Any] = {
        "median_ms": lat.get("median_ms"),
        "p95_ms": lat.get("p95_ms"),
        "max_ms": lat.get("max_ms"),
        "n": lat.get("n"),
    }
    for key in ("version", "backend"):
        if key in result:
            out[key] = result[key]
    if result.get("errors"):
        out["errors"] = result["errors"]
    return out


# -- the idle worker --------------------------------------------------------------------------


class IdleWorker:
    """Our worker on a database, queue and channel of its own, counting its claims."""

    def __init__(self, tag: str) -> None:
        self.claims = PEERS_HOME / "results" / "raw" / f"ujobs_{tag}_idle.claims"
        self.log = PEERS_HOME / "results" / "raw" / f"ujobs_{tag}_idle_worker.log"
        self.claims.parent.mkdir(parents=True, exist_ok=True)
        self.claims.unlink(missing_ok=True)
        self.env = base_env(tag)
        self.env.update(
            {
                "BENCH_UJOBS_DB": "bench_ujobs_idle",
                "BENCH_UJOBS_QUEUE": "bench-idle",
                "BENCH_UJOBS_CHANNEL": "ujobs:wake:bench-idle",
                "BENCH_CLAIMS_OUT": str(self.claims),
                "BENCH_OUT": str(self.claims.with_suffix(".jobs")),
            }
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.started = 0.0

    def start(self) -> None:
        setup = "import bench_ujobs; bench_ujobs.setup()"
        subprocess.run(
            [sys.executable, "-c", setup], cwd=HERE, env=self.env, check=True, timeout=60
        )
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, str(ADAPTER), "--worker"],
                cwd=PEERS_DIR,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.started = time.time()

    def finish(self) -> dict[str, Any]:
        """Wait out the window, stop the worker, count."""
        window_start = self.started + IDLE_SETTLE_S
        remaining = window_start + IDLE_WINDOW_S - time.time()
        if remaining > 0:
            time.sleep(remaining)
        window_end = time.time()
        self.stop()
        stamps = [float(x) for x in self.claims.read_text().split()] if self.claims.exists() else []
        counted = sorted(s for s in stamps if window_start <= s <= window_end)
        # The steady rate: claims per minute between the first and the last counted claim
        # (counting the window's edges instead would be off by one claim either way).
        span = counted[-1] - counted[0] if len(counted) > 1 else 0.0
        rate = round((len(counted) - 1) * 60 / span, 2) if span > 0 else None
        status = self._status()
        return {
            "idle_claims_per_min": rate,
            "idle_window_s": round(window_end - window_start, 1),
            "idle_claims_in_window": len(counted),
            "idle_wake_live": status.get("wake_live"),
        }

    def _status(self) -> dict[str, Any]:
        for line in self.log.read_text(errors="replace").splitlines():
            if line.startswith("{"):
                status: dict[str, Any] = json.loads(line)
                return status
        return {}

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()


# -- the run ----------------------------------------------------------------------------------


def outbox_figures(outbox: dict[str, Any] | None) -> dict[str, Any]:
    """The outbox's pickup at the top level (issue 6): absent when the variant did not run."""
    if outbox is None:
        return {}
    return {
        "outbox_latency_median_ms": outbox["median_ms"],
        "outbox_latency_p95_ms": outbox["p95_ms"],
    }


def wanted_variants() -> list[str]:
    named = os.environ.get("BENCH_VARIANTS")
    chosen = named.split() if named is not None else list(VARIANTS)
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown BENCH_VARIANTS {unknown}; choose from {sorted(VARIANTS)}")
    return chosen


def main() -> None:
    tag = time.strftime("lat%Y%m%dT%H%M%S")
    errors: list[str] = []
    peers = wanted_peers(ALL_PEERS)
    ensure_venvs(peers)

    idle = IdleWorker(tag)
    idle.start()
    try:
        ours = run_harness(ours_argv(), base_env(f"{tag}_ujobs"), RUN_TIMEOUT_S)
        variants: dict[str, Any] = {}
        for name in wanted_variants():
            print(f"latency: ultimate-jobs, {name}", file=sys.stderr)
            env = base_env(f"{tag}_ujobs_{name}") | VARIANTS[name]
            variants[name] = latency_of(run_harness(ours_argv(), env, RUN_TIMEOUT_S))
        peer_figures: dict[str, Any] = {}
        for peer in peers:
            python = peer_python(peer)
            if not python.exists():
                peer_figures[peer] = {"errors": [f"no venv at {python.parent.parent}"]}
                continue
            print(f"latency: {peer}", file=sys.stderr)
            result = run_harness(peer_argv(peer), base_env(f"{tag}_{peer}"), RUN_TIMEOUT_S)
            peer_figures[peer] = latency_of(result)
        idle_figures = idle.finish()
    finally:
        idle.stop()

    mine = latency_of(ours)
    errors.extend(ours.get("errors", []))
    line: dict[str, Any] = {
        "bench": "latency",
        "n": N_LAT,
        "interval_ms": 50,
        "wake": "redis",
        "version": ours.get("version"),
        "latency_median_ms": mine["median_ms"],
        "latency_p95_ms": mine["p95_ms"],
        "latency_max_ms": mine["max_ms"],
        "latency_n": mine["n"],
        **outbox_figures(variants.get("outbox")),
        **idle_figures,
        "variants": variants,
        "peers": peer_figures,
        "targets": TARGETS,
        "errors": errors,
    }
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
