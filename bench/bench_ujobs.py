"""ultimate-jobs as an adapter of the peers' harness (``shared/bench/peers/common.py``).

Run by ``bench/latency.py`` beside the peers' adapters, or on its own:

    /work/venv/bin/python bench/bench_ujobs.py             # the harness: one JSON line

The harness is imported from the shared peers folder (never copied): ``UJOBS_PEERS_DIR``, else
the first of ``../shared/bench/peers`` and ``../../shared/bench/peers`` (from the project root)
that exists. Settings, by environment:

- ``BENCH_UJOBS_WAKE``: ``redis`` (default — the enqueuer publishes on the Redis channel, the
  worker subscribes), ``postgres`` (the enqueue's own throttled ``pg_notify``, one LISTEN
  session in the worker) or ``none`` (the poll alone).
- ``BENCH_UJOBS_OUTBOX=1``: every enqueue is STAGED inside a transaction of its own (the
  outbox facade installed; the job's timestamp is taken inside the transaction just before
  the stage's INSERT, so the figure counts the INSERT and the COMMIT — a little more than
  "from the COMMIT", the spec's measure), and the worker process
  also runs the relay, woken by LISTEN ``x_outbox_wake`` (one session beside the jobs
  channel's), publishing through the announcing driver so this process's worker starts the job
  at once. The wake setting still decides how the worker hears OTHER processes' enqueues.
- ``BENCH_UJOBS_DB`` (default ``bench_ujobs``), ``BENCH_UJOBS_QUEUE`` (``bench``),
  ``BENCH_UJOBS_CHANNEL`` (``ujobs:wake:bench``): where the run lives.
- ``BENCH_UJOBS_SLOT_MS`` (default 10, the library's ``REDIS_WAKE_SLOT_MS``, on either driver):
  the Redis announce's throttle slot; ``250`` is the Postgres ``NOTIFY`` slot, a variant of
  ``bench/latency.py``.
- ``BENCH_UJOBS_LAT_INTERVAL_S``: the producer's spacing instead of the harness's 50 ms, for
  the variant where every job lands in a slot of its own (only OUR adapter reads it).
- ``BENCH_UJOBS_DRIVER``: ``postgres`` (default) or ``redis`` — the Redis driver
  (``redis_driver``) on Redis DB ``BENCH_UJOBS_REDIS_DB`` (default 6; the peers use 1-5) under
  the key prefix ``ujobs-bench``, whose keys ``setup()`` deletes (SCAN + UNLINK of that prefix
  only). The wake is then the Redis channel, announced by the enqueue script itself
  (``redis_driver(wake_channel=...)``, no announcer; ``BENCH_UJOBS_WAKE=none`` turns it off,
  ``postgres`` is refused), and the outbox still stages in Postgres.
- ``BENCH_UJOBS_HISTORY=<n>`` (default 0; Postgres only): every ``setup()`` leaves ``n``
  FINISHED runs of the bench job in ``x_jobs`` after the migration (``insert_history``): 98 %
  ``done``, 1 % ``dead``, 1 % ``failed``, in the bench's own queue, created over the week that
  ended an hour ago, then ``VACUUM ANALYZE x_jobs`` and a ``CHECKPOINT`` — what a live
  system's autovacuum and checkpointer would have done by then. The drain phase then runs
  over a table holding that history (issue 4: the hot path must not scan it). ``setup()``
  reports the rows and the seconds it took on stderr as a ``bench-note`` line
  (``bench/harness_run.py`` collects those).
- ``BENCH_UJOBS_CLAIM_AHEAD`` (default 256, sixteen per slot): the worker's ``claim_ahead``
  (the most rows claimed beyond its free slots; the buffer holds about 50 ms of the worker's
  pace within it, ``ujobs.worker.claim_ahead``) — what ``ujobs worker`` on one queue uses when
  ``UJOBS_CLAIM_AHEAD`` is unset (``WorkerConfig.claim_ahead_rows()``); 0 is the library's own
  default (the runs that chose it: bench/RESULTS.md).
- ``BENCH_UJOBS_SETTLEMENTS=1`` (Postgres only): the worker's driver writes the NATS edge's
  settlements outbox in every settle (``postgres_driver(settlements=True)``, what
  ``UJOBS_NATS_SETTLEMENTS=on`` does), for the drain with it against the drain without.
- ``BENCH_UJOBS_GC_THRESHOLD`` (default ``UJOBS_GC_THRESHOLD``'s, 10,000): the collector's
  first threshold, set as ``ujobs worker`` sets it once started (0: Python's own).
- ``UJOBS_EVENT_LOOP`` (default ``auto``): the worker process's event loop, chosen as
  ``ujobs worker`` chooses it (uvloop where installed; ``asyncio`` for the standard loop).
- ``BENCH_CLAIMS_OUT``: a file the worker appends one line per claim statement to (its
  ``time.time()``), which is how ``bench/latency.py`` counts an idle worker's claims.

The worker is ``job_worker`` with 16 slots on one queue over the Postgres driver — the
settings the Postgres peers run with — and the job body calls ``common.record`` first thing.
The project is run from its source tree, not installed, so the harness's version lookup is
answered from ``pyproject.toml`` (``_SourceTreeFinder``).
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import json
import os
import signal
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

ROOT = Path(__file__).resolve().parents[1]


def peers_dir() -> Path:
    """The shared peers folder holding ``common.py``."""
    given = os.environ.get("UJOBS_PEERS_DIR")
    candidates = [Path(given)] if given else []
    candidates += [ROOT.parent / "shared/bench/peers", ROOT.parent.parent / "shared/bench/peers"]
    for candidate in candidates:
        if (candidate / "common.py").is_file():
            return candidate.resolve()
    raise SystemExit(
        "cannot find shared/bench/peers/common.py; set UJOBS_PEERS_DIR to the peers folder"
    )


PEERS_DIR = peers_dir()
for entry in (str(ROOT), str(PEERS_DIR)):
    if entry not in sys.path:
        sys.path.insert(0, entry)

import asyncpg  # noqa: E402
import common  # noqa: E402
from prometheus_client import CollectorRegistry  # noqa: E402

from ujobs import job, t  # noqa: E402
from ujobs.drivers.base import JobDriver  # noqa: E402
from ujobs.drivers.postgres.driver import postgres_driver  # noqa: E402
from ujobs.drivers.postgres.pool import postgres_pool  # noqa: E402
from ujobs.execution.run import Run  # noqa: E402
from ujobs.jobs.registry import Registry  # noqa: E402
from ujobs.lifecycle import Lifecycle  # noqa: E402
from ujobs.metrics import JobMetrics  # noqa: E402
from ujobs.services.config.variables import CLAIM_AHEAD_PER_SLOT  # noqa: E402
from ujobs.services.runtime.event_loop import loop_from_env, run_on  # noqa: E402
from ujobs.services.runtime.gc_tuning import DEFAULT_GC_THRESHOLD, tune_gc  # noqa: E402
from ujobs.wake.listener import (  # noqa: E402
    OUTBOX_WAKE_CHANNEL,
    POSTGRES_WAKE_CHANNEL,
    ChannelWake,
    postgres_wake,
    redis_wake,
)
from ujobs.wake.protocol import REDIS_WAKE_SLOT_MS  # noqa: E402
from ujobs.worker import job_worker  # noqa: E402

# The drain's wall time starts at the worker's spawn, so the worker process imports only what
# it runs: the harness's side (setup, enqueue, the announcer), the outbox and the Redis driver
# are imported where they are used. Only typing sees them here.
if TYPE_CHECKING:
    from ujobs.drivers.redis.driver import RedisDriver
    from ujobs.wake.announce import RedisAnnouncer

WAKE = os.environ.get("BENCH_UJOBS_WAKE", "redis")
if WAKE not in ("redis", "postgres", "none"):
    raise SystemExit(f"BENCH_UJOBS_WAKE must be redis, postgres or none, got {WAKE!r}")
DB_NAME = os.environ.get("BENCH_UJOBS_DB", "bench_ujobs")
if not DB_NAME.startswith("bench_"):
    raise SystemExit(f"BENCH_UJOBS_DB must start with bench_ (the harness's prefix): {DB_NAME!r}")
OUTBOX = os.environ.get("BENCH_UJOBS_OUTBOX", "") == "1"
DRIVER = os.environ.get("BENCH_UJOBS_DRIVER", "postgres")
if DRIVER not in ("postgres", "redis"):
    raise SystemExit(f"BENCH_UJOBS_DRIVER must be postgres or redis, got {DRIVER!r}")
if DRIVER == "redis" and WAKE == "postgres":
    raise SystemExit("BENCH_UJOBS_DRIVER=redis announces on Redis: use BENCH_UJOBS_WAKE=redis")
REDIS_DB = int(os.environ.get("BENCH_UJOBS_REDIS_DB", "6"))
REDIS_PREFIX = "ujobs-bench"
QUEUE = os.environ.get("BENCH_UJOBS_QUEUE", "bench")
CHANNEL = os.environ.get("BENCH_UJOBS_CHANNEL", "ujobs:wake:bench")
# The Redis driver's default announce slot is the library's REDIS_WAKE_SLOT_MS too.
SLOT_MS = int(os.environ.get("BENCH_UJOBS_SLOT_MS", REDIS_WAKE_SLOT_MS))
if os.environ.get("BENCH_UJOBS_LAT_INTERVAL_S"):
    common.LAT_INTERVAL = float(os.environ["BENCH_UJOBS_LAT_INTERVAL_S"])
REDIS_URL = common.redis_url(0)
SLOTS = 16
CLAIM_AHEAD = int(os.environ.get("BENCH_UJOBS_CLAIM_AHEAD", str(CLAIM_AHEAD_PER_SLOT * SLOTS)))
GC_THRESHOLD = int(os.environ.get("BENCH_UJOBS_GC_THRESHOLD", str(DEFAULT_GC_THRESHOLD)))
DSN = f"{common.PG_BASE}/{DB_NAME}"
HISTORY = int(os.environ.get("BENCH_UJOBS_HISTORY", "0"))
SETTLEMENTS = os.environ.get("BENCH_UJOBS_SETTLEMENTS", "") == "1"
if HISTORY and DRIVER != "postgres":
    raise SystemExit("BENCH_UJOBS_HISTORY fills x_jobs: it needs BENCH_UJOBS_DRIVER=postgres")
# Every job this process's runs finish ends after this instant; the history ends an hour before
# it. lib_done counts the rows finished since, through x_jobs_finished_idx, never the history.
STARTED_S = time.time()

PEER = (
    ("ultimate-jobs" if WAKE == "redis" else f"ultimate-jobs ({WAKE} wake)")
    + (" on the redis driver" if DRIVER == "redis" else "")
    + (" through the outbox" if OUTBOX else "")
)
DIST = "ultimate-jobs"
BACKEND = (
    "redis" if DRIVER == "redis" else "postgres" if WAKE != "redis" else "postgres + redis wake"
)
OVER = (
    f"redis_driver (redis DB {REDIS_DB}, prefix {REDIS_PREFIX!r})"
    if DRIVER == "redis"
    else "postgres_driver (postgres_pool: generic plans, as ujobs worker builds it)"
)
SETTINGS = (
    f"job_worker(concurrency={SLOTS}, queues=[{QUEUE!r}], claim_ahead={CLAIM_AHEAD}) "
    f"in 1 process over {OVER}; "
    f"wake={WAKE}: "
    + {
        "redis": ("the enqueue script publishes" if DRIVER == "redis" else "enqueuer publishes")
        + f" the queue on {CHANNEL!r} (once per queue per {SLOT_MS} ms slot), "
        "worker subscribes, proven by a probe",
        "postgres": "the enqueue statement's pg_notify (once per queue per 250 ms slot), one "
        "LISTEN session in the worker",
        "none": "the poll alone (idle ceiling 2 s)",
    }[WAKE]
    + "; batch = job.enqueue_many(generator of inputs) (one COPY, streamed)"
    + f"; latency jobs {common.LAT_INTERVAL * 1000:g} ms apart"
)
NOTES = [
    "run from the source tree; version read from pyproject.toml plus the git commit",
    "enqueue through the public API: the job handle's request() and the installed facade",
]
if HISTORY:
    NOTES.append(
        f"x_jobs holds {HISTORY} finished runs of the bench job (98% done, 1% dead, 1% failed) "
        "from setup() on, then VACUUM ANALYZE"
    )


# -- the version the harness asks importlib.metadata for ------------------------------------


def _source_version() -> str:
    version = str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])
    try:
        sha = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return version
    return f"{version}+g{sha}" if sha else version


class _SourceTree(importlib.metadata.Distribution):
    def read_text(self, filename: str) -> str | None:
        if filename == "METADATA":
            return f"Metadata-Version: 2.1\nName: {DIST}\nVersion: {_source_version()}\n"
        return None

    def locate_file(self, path: Any) -> Path:
        return ROOT / str(path)


class _SourceTreeFinder(importlib.metadata.DistributionFinder):
    """Answers ``metadata.version('ultimate-jobs')`` for the uninstalled source tree (the
    documented extension point of importlib.metadata); an installed copy is found first."""

    def find_spec(self, *args: Any, **kwargs: Any) -> None:
        return None

    def find_distributions(self, context: Any = None) -> Iterator[importlib.metadata.Distribution]:
        name = getattr(context, "name", None)
        if name is not None and name.replace("_", "-").lower() == DIST:
            yield _SourceTree()


def answer_version() -> None:
    """Let the harness find our version (only its process asks; the worker never does)."""
    try:
        importlib.metadata.version(DIST)
    except importlib.metadata.PackageNotFoundError:
        sys.meta_path.append(_SourceTreeFinder())


# -- the job ----------------------------------------------------------------------------------


@job(
    name="bench-noop",
    input=t.object(seq=t.number.int(), ts=t.number),
    idempotency_key=lambda i: f"bench:{i.seq}:{i.ts!r}",
    tenant="none",
    queue=QUEUE,
)
async def bench_noop(run: Run[Any]) -> None:
    common.record(run.input.seq, run.input.ts)


# -- the adapter interface --------------------------------------------------------------------

_pool: asyncpg.Pool[Any] | None = None
_announcer: RedisAnnouncer | None = None
_redis: RedisDriver | None = None


def bench_redis_driver() -> RedisDriver:
    """The Redis driver of the run, on a client of its own (closed with it); its enqueues
    announce on the wake channel from inside the script when the wake is on."""
    from redis.asyncio import Redis

    from ujobs.drivers.redis.driver import RedisDriver

    return RedisDriver(
        Redis.from_url(common.redis_url(REDIS_DB)),
        prefix=REDIS_PREFIX,
        owns_client=True,
        wake_channel=CHANNEL if WAKE == "redis" else None,
        wake_slot_ms=SLOT_MS,
    )


async def drop_redis_keys() -> None:
    """Delete the run's keys: every key under ``{ujobs-bench}`` in its DB, nothing else."""
    driver = bench_redis_driver()
    try:
        batch: list[Any] = []
        async for key in driver.client.scan_iter(match=f"{{{REDIS_PREFIX}}}*", count=1000):
            batch.append(key)
            if len(batch) >= 1000:
                await driver.client.unlink(*batch)
                batch.clear()
        if batch:
            await driver.client.unlink(*batch)
    finally:
        await driver.close()


def precompile() -> None:
    """Write the bytecode of the project's modules, as installing the project would.

    The worker runs from the source tree, and with ``PYTHONDONTWRITEBYTECODE`` set (as on the
    bench machine) every worker process would compile each module again inside the drain's
    timed start-up, which a peer installed in its venv (bytecode written by pip) never does.
    ``compileall`` writes the files whatever that setting says; a stale one is never used.
    The folders are the ones the worker imports ``ujobs`` from: an editable install's
    ``build/__editable__…`` link farm keeps its own ``__pycache__`` beside the links, so the
    bytecode of ``shared/`` alone is never read there (120 modules compiled at every start)."""
    import compileall
    import importlib.util

    spec = importlib.util.find_spec("ujobs")
    package = [Path(p) for p in (spec.submodule_search_locations or [])] if spec else []
    for folder in [*package, ROOT / "shared", ROOT / "bench"]:
        compileall.compile_dir(folder, quiet=2)


def setup() -> None:
    precompile()
    if DRIVER == "redis":
        asyncio.run(drop_redis_keys())
        if not OUTBOX:
            return
    common.recreate_pg_database(DB_NAME.removeprefix("bench_"))  # DROP + CREATE bench_<...>

    async def go() -> None:
        from bench_history import insert_history

        from ujobs.drivers.postgres.migrate import migrate

        conn = await asyncpg.connect(DSN)
        try:
            await migrate(conn)
            if HISTORY:
                started = time.perf_counter()
                await insert_history(conn, HISTORY, name=bench_noop.name, queue=QUEUE)
                note = {
                    "history_rows": HISTORY,
                    "history_s": round(time.perf_counter() - started, 1),
                }
                print("bench-note " + json.dumps(note), file=sys.stderr, flush=True)
        finally:
            await conn.close()

    asyncio.run(go())


async def connect() -> None:
    from ujobs.jobs.enqueue_target import set_job_driver, set_jobs_facade
    from ujobs.outbox import outbox_jobs_facade, postgres_outbox_store
    from ujobs.wake.announce import RedisAnnouncer, announcing

    global _pool, _announcer, _redis
    if DRIVER == "postgres" or OUTBOX:
        _pool = await asyncpg.create_pool(DSN, min_size=1, max_size=4)
    inner: JobDriver
    if DRIVER == "redis":
        _redis = inner = bench_redis_driver()
        _announcer = None  # the enqueue script announces
    else:
        assert _pool is not None
        inner = postgres_driver(_pool)
        _announcer = (
            RedisAnnouncer(REDIS_URL, CHANNEL, slot_ms=SLOT_MS) if WAKE == "redis" else None
        )
    driver = announcing(inner, _announcer)
    set_job_driver(driver)
    if OUTBOX:
        assert _pool is not None
        store = postgres_outbox_store(executor=_pool)
        set_jobs_facade(outbox_jobs_facade(store=store, driver=driver, mode="required"))


async def close() -> None:
    from ujobs.jobs.enqueue_target import set_job_driver, set_jobs_facade

    global _pool, _announcer, _redis
    set_job_driver(None)
    set_jobs_facade(None)
    if _announcer is not None:
        await _announcer.close()
        _announcer = None
    if _redis is not None:
        await _redis.close()
        _redis = None
    if _pool is not None:
        await _pool.close()
        _pool = None


async def enqueue_one(seq: int, ts: float) -> None:
    if not OUTBOX:
        await bench_noop.enqueue({"seq": seq, "ts": ts})
        return
    from ujobs.context import transaction

    assert _pool is not None
    async with _pool.acquire() as conn, transaction(conn):
        # The spec measures the outbox's pickup from the caller's COMMIT. The row has to carry
        # its timestamp, so the clock starts just before the stage's INSERT: the INSERT and the
        # COMMIT are counted (a little more than "from the COMMIT"); checking a connection out
        # of the pool and BEGIN, the caller's own transaction overhead, are not.
        await bench_noop.enqueue({"seq": seq, "ts": time.time()})


async def enqueue_batch(items: list[tuple[int, float]]) -> None:
    from ujobs.context import transaction

    # The handle's enqueue_many builds each request as the driver's COPY goes out.
    inputs = ({"seq": s, "ts": ts} for s, ts in items)
    if not OUTBOX:
        await bench_noop.enqueue_many(inputs)
        return
    assert _pool is not None
    async with _pool.acquire() as conn, transaction(conn):
        await bench_noop.enqueue_many(inputs)


def worker_argv() -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), "--worker"]


async def lib_done(n: int) -> bool:
    if DRIVER == "redis":
        driver = bench_redis_driver()
        try:
            queue = (await driver.stats()).queues.get(QUEUE)
        finally:
            await driver.close()
        return queue is not None and queue.done >= n
    conn = await asyncpg.connect(DSN)
    try:
        done = await conn.fetchval(
            "select count(*) from x_jobs where state = 'done' and finished_at >= x_ts($1::bigint)",
            int(STARTED_S * 1000),
        )
    finally:
        await conn.close()
    return bool(done >= n)


# -- the worker process -----------------------------------------------------------------------


def count_claims(driver: JobDriver, path: str) -> None:
    """Append one line per claim statement to ``path``: the idle-cost figure's source."""
    inner = driver.claim
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    async def claim(options: Any) -> Any:
        os.write(fd, f"{time.time()!r}\n".encode())
        return await inner(options)

    driver.claim = claim  # type: ignore[method-assign]


async def worker_main() -> None:
    pool: asyncpg.Pool[Any] | None = None
    if DRIVER == "postgres" or OUTBOX:
        # The pool ``ujobs worker`` builds (services/runtime/backends.py): generic plans, no reset.
        pool = await postgres_pool(DSN, min_size=2, max_size=8)
    driver: JobDriver
    if DRIVER == "redis":
        driver = bench_redis_driver()
    else:
        assert pool is not None
        driver = postgres_driver(pool, settlements=SETTLEMENTS)
    claims_out = os.environ.get("BENCH_CLAIMS_OUT")
    if claims_out:
        count_claims(driver, claims_out)
    wake: ChannelWake | None = None
    if WAKE == "redis":
        wake = redis_wake(REDIS_URL, CHANNEL)
    elif WAKE == "postgres":
        assert pool is not None
        wake = postgres_wake(DSN, pool, channels=(POSTGRES_WAKE_CHANNEL, OUTBOX_WAKE_CHANNEL))
    outbox_wake: ChannelWake | None = None
    relay = None
    if OUTBOX:
        assert pool is not None
        if wake is not None and OUTBOX_WAKE_CHANNEL in wake.channels:
            outbox_listen = wake.channel(OUTBOX_WAKE_CHANNEL)
        else:
            outbox_wake = postgres_wake(DSN, pool, channels=(OUTBOX_WAKE_CHANNEL,))
            outbox_listen = outbox_wake.channel(OUTBOX_WAKE_CHANNEL)
        from ujobs.outbox import outbox_relay, postgres_outbox_store
        from ujobs.wake.announce import announcing

        relay = outbox_relay(
            store=postgres_outbox_store(executor=pool),
            driver=announcing(driver if DRIVER == "redis" else postgres_driver(pool)),
            wake=outbox_listen,
            lifecycle=Lifecycle(),
        )
    registry = Registry()
    registry.register_job(bench_noop)
    tune_gc(GC_THRESHOLD)
    worker = job_worker(
        driver=driver,
        context=None,
        registry=registry,
        queues=[QUEUE],
        concurrency=SLOTS,
        claim_ahead=CLAIM_AHEAD,
        wake=wake,
        metrics=JobMetrics(CollectorRegistry()),
        lifecycle=Lifecycle(),
        close_driver=False,
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    if wake is not None:
        await wake.start()
    if outbox_wake is not None:
        await outbox_wake.start()
    await worker.start()
    if relay is not None:
        await relay.start()
    if wake is not None:
        try:
            await wake.signals.wait("live", timeout_s=10)
        except TimeoutError:
            pass
    print(json.dumps({"worker": worker.id, "wake": WAKE, "wake_live": bool(wake and wake.live)}))
    await stop.wait()
    if relay is not None:
        await relay.stop()
    if outbox_wake is not None:
        await outbox_wake.stop()
    await worker.stop()
    if wake is not None:
        await wake.stop()
    if DRIVER == "redis":
        await driver.close()
    if pool is not None:
        await pool.close()


if __name__ == "__main__":
    if "--worker" in sys.argv:
        # On the loop ``ujobs worker`` runs on (UJOBS_EVENT_LOOP, default auto: uvloop).
        run_on(loop_from_env(os.environ), worker_main())
    else:
        answer_version()
        common.main(sys.modules[__name__])
