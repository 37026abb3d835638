"""The Redis driver's scripts: one per operation, called by SHA, reloaded after NOSCRIPT; and the
import boundary that keeps redis out of every other module of ``shared``."""

from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from importlib import resources
from pathlib import Path

import pytest

from tests.support.redis_keys import redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import COUNTER_TIERS, ClaimOptions, EnqueueRequest, NackOptions
from ujobs.drivers.redis.driver import RedisDriver
from ujobs.drivers.redis.scripts import OPERATIONS, PRELUDE, SCRIPTS, read_lua

ROOT = Path(__file__).resolve().parents[2]
REDIS_MODULES = {
    "ujobs.drivers.redis",  # the package: the Redis driver's public import path
    "ujobs.drivers.redis.driver",
    "ujobs.drivers.redis.batch",
    "ujobs.drivers.redis.codec",
    "ujobs.drivers.redis.scripts",
    "ujobs.wake.transport_redis",  # the Redis wake's transport, imported only by redis_wake()
}


@pytest.fixture
async def driver(redis_url: str, redis_prefix: str) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=FrozenClock()) as drv:
        yield drv


async def run_every_operation(driver: RedisDriver) -> None:
    """Each script once; ids fresh per call so a second call runs the same paths."""
    jid = uuid.uuid4().hex
    await driver.enqueue(EnqueueRequest(name="n", input=1, idempotency_key=jid, id=jid))
    [job] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    await driver.heartbeat(jid, job.ref, 1_000)
    await driver.start_ahead(jid, job.ref)
    await driver.save_step(jid, job.ref, job.run_id, "s", 1, started_at_ms=0)
    await driver.load_steps(job.run_id, tenant_id=job.tenant_id)
    await driver.nack(jid, job.ref, NackOptions(error="e"))
    [job] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    await driver.ack(jid, job.ref)
    await driver.stats()
    await driver.counter_buckets("n", 0)
    await driver.store_watch.verify()
    await driver.results.watch(jid)


def test_every_operation_has_one_file_and_every_file_an_operation() -> None:
    lua = resources.files("ujobs.drivers.redis") / "lua"
    files = {p.name for p in lua.iterdir() if p.name.endswith(".lua")}
    assert files == {f"{op}.lua" for op in OPERATIONS} | {PRELUDE}
    for op, script in SCRIPTS.items():
        assert script.source.startswith(read_lua(PRELUDE))
        assert script.source.endswith(read_lua(f"{op}.lua"))
        assert script.sha == hashlib.sha1(script.source.encode()).hexdigest()


def test_the_prelude_counter_constants_are_the_contracts() -> None:
    prelude = read_lua(PRELUDE)
    width = re.search(r"COUNTER_WIDTH_MS = (\d+)", prelude)
    keep = re.search(r"COUNTER_KEEP_MS = (\d+)", prelude)
    assert width is not None
    assert keep is not None
    assert (int(width.group(1)), int(keep.group(1))) == COUNTER_TIERS[0]


async def test_scripts_are_called_by_sha(driver: RedisDriver) -> None:
    await run_every_operation(driver)
    shas = [script.sha for script in SCRIPTS.values()]
    assert await driver.client.script_exists(*shas) == [True] * len(shas)


async def test_a_flushed_script_cache_is_reloaded_on_noscript(driver: RedisDriver) -> None:
    await run_every_operation(driver)
    await driver.client.script_flush()
    enqueue, claim = SCRIPTS["enqueue"].sha, SCRIPTS["claim"].sha
    assert await driver.client.script_exists(enqueue, claim) == [False, False]
    # The next enqueue meets NOSCRIPT, loads its own script (only it) and lands.
    out = await driver.enqueue(EnqueueRequest(name="n", input=2, idempotency_key="k2"))
    assert not out.deduped
    assert await driver.client.script_exists(enqueue, claim) == [True, False]
    await run_every_operation(driver)
    shas = [script.sha for script in SCRIPTS.values()]
    assert await driver.client.script_exists(*shas) == [True] * len(shas)


def _run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60
    )


def test_no_other_module_of_shared_imports_redis() -> None:
    code = f"""
import importlib, pkgutil, sys
import ujobs
skip = {sorted(REDIS_MODULES)!r}
def walk(path, prefix):
    for info in pkgutil.iter_modules(path, prefix):
        if info.name in skip or info.name in ("ujobs.services", "ujobs.webhooks", "ujobs.exports"):
            continue
        module = importlib.import_module(info.name)
        if info.ispkg:
            walk(module.__path__, info.name + ".")
walk(ujobs.__path__, "ujobs.")
loaded = sorted(m for m in sys.modules if m == "redis" or m.startswith("redis."))
print("LOADED", loaded)
assert not loaded, loaded
"""
    done = _run_python(code)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "LOADED []" in done.stdout


def test_the_driver_imports_on_its_own() -> None:
    done = _run_python(
        "from ujobs.drivers import redis_driver; import sys; "
        "assert 'ujobs.drivers.redis.driver' in sys.modules; print(redis_driver.__name__)"
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "redis_driver"
