"""compose.yaml, run without Docker: every service of ours is started with ITS command and
ITS environment as a local process — the backends' hostnames mapped to the test servers, the
app directory mounted the way compose mounts it — against real Postgres, Redis and NATS. The
one-shot migrate runs first (every service waits on it); then a user's app (not ours) runs end
to end: a job staged in the outbox is published by the relay and done by the worker, and the
scheduler's task fires a job the worker finishes. SIGTERM drains every service to exit 0.

What is not compose's own: each service listens on a free port (in compose each container has
its own network namespace, so they cannot clash; here they share one host) and on 127.0.0.1.
"""

from __future__ import annotations

import asyncio
import re
import textwrap
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import asyncpg
import pytest
import yaml  # type: ignore[import-untyped]  # no stubs installed (types-PyYAML)

from tests.e2e.service_process import ROOT, ServiceProcess, service_env
from ujobs.drivers.base import EnqueueRequest
from ujobs.outbox import postgres_outbox_store

pytestmark = pytest.mark.slow

COMPOSE = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, dict[str, Any]] = COMPOSE["services"]
OURS = {
    name: s
    for name, s in SERVICES.items()
    if s.get("image") == "${UJOBS_IMAGE:-ultimate-jobs:local}"
}
BACKENDS = {"postgres", "redis", "nats"}
LOCAL_ONLY = {
    "UJOBS_API_PORT": "0",
    "UJOBS_METRICS_PORT": "0",
    "UJOBS_API_HOST": "127.0.0.1",
    "UJOBS_METRICS_HOST": "127.0.0.1",
}

USER_APP = """
import sys

from ujobs import Run, define_api, job, t, task


@job(input=t.object(n=t.number.int()), idempotency_key=lambda i: f"greet:{i.n}", tenant="none")
async def greet(run: Run) -> None:
    await run.step.run("hello", lambda _: {"n": run.input.n})


@task(cron="* * * * * *", tz="UTC", catch_up="skip")
def every_second(occurrence_ms: int):
    return [(greet, {"n": occurrence_ms})]


api = define_api(jobs=[sys.modules[__name__]], tasks=[sys.modules[__name__]], install=False)
"""


def interpolate(value: Any, given: dict[str, str]) -> str:
    """compose's ``${VAR:-default}`` and ``${VAR}`` against ``given``."""

    def one(match: re.Match[str]) -> str:
        return given.get(match[1]) or (match[3] or "")

    return re.sub(r"\$\{([A-Z_]+)(:-([^}]*))?\}", one, str(value))


def mapped(env: dict[str, str], backends: dict[str, str]) -> dict[str, str]:
    """Each URL whose host is one of compose's backend services points at the test's server."""
    out = {}
    for key, value in env.items():
        host = (urlsplit(value).hostname if "://" in value else None) or ""
        out[key] = backends.get(host, value)
    return {**out, **{k: v for k, v in LOCAL_ONLY.items() if k in out}}


def local_cwd(service: dict[str, Any], given: dict[str, str]) -> Path:
    """The host directory compose mounts at the service's working directory."""
    for volume in service.get("volumes", []):
        source, target = interpolate(volume, given).split(":")[:2]
        if target == service.get("working_dir"):
            return (ROOT / source).resolve()
    return ROOT


def volume_dirs(tmp: Path) -> dict[str, str]:
    """Each named volume's mount point (e.g. the key volume's /run/ujobs-key) to a directory of
    the test's: compose gives every service that mounts the volume the same files."""
    out: dict[str, str] = {}
    for service in OURS.values():
        for volume in service.get("volumes", []):
            source, target = str(volume).split(":")[:2]
            if source in (COMPOSE.get("volumes") or {}):
                out[target] = str(tmp / source)
    return out


def on_volumes(value: str, volumes: dict[str, str]) -> str:
    for target, local in volumes.items():
        if value == target or value.startswith(target + "/"):
            return local + value[len(target) :]
    return value


def process_env(
    service: dict[str, Any],
    given: dict[str, str],
    backends: dict[str, str],
    volumes: dict[str, str],
) -> Any:
    env = {
        k: on_volumes(interpolate(v, given), volumes)
        for k, v in (service.get("environment") or {}).items()
    }
    return service_env(**mapped(env, backends))


ONE_SHOT = ("migrate", "keygen")  # run to exit 0, in this order, before the others start


async def get(url: str) -> int:
    async with aiohttp.ClientSession() as session, session.get(url) as response:
        return response.status


async def until_done(pool: asyncpg.Pool[Any], query: str, *args: Any) -> None:
    async with asyncio.timeout(60):
        while not await pool.fetchval(query, *args):
            await asyncio.sleep(0.1)


async def test_every_compose_service_runs_the_users_app_end_to_end(
    tmp_path: Path, pg_fresh_dsn: str, redis_url: str, nats_url: str
) -> None:
    app_dir = tmp_path / "myproject"
    (app_dir / "myapp").mkdir(parents=True)
    (app_dir / "myapp" / "__init__.py").write_text("")
    (app_dir / "myapp" / "jobs.py").write_text(textwrap.dedent(USER_APP))
    given = {"UJOBS_APP": "myapp.jobs:api", "UJOBS_APP_DIR": str(app_dir)}
    backends = {"postgres": pg_fresh_dsn, "redis": redis_url, "nats": nats_url}
    assert {h for s in OURS.values() for h in s.get("depends_on", {})} - set(OURS) <= BACKENDS

    volumes = volume_dirs(tmp_path / "volumes")
    for name in ONE_SHOT:
        one_shot = OURS[name]
        done = await ServiceProcess.start(
            *(on_volumes(str(arg), volumes) for arg in one_shot["command"]),
            env=process_env(one_shot, given, backends, volumes),
            cwd=local_cwd(one_shot, given),
        )
        assert await done.exit_code(60) == 0, done.out + [str(line) for line in done.logs]

    started: dict[str, ServiceProcess] = {}
    try:
        for name in sorted(set(OURS) - set(ONE_SHOT)):
            service = OURS[name]
            cwd = local_cwd(service, given)
            assert cwd == app_dir, name  # the mounted app directory is where it runs
            started[name] = await ServiceProcess.start(
                *service["command"], env=process_env(service, given, backends, volumes), cwd=cwd
            )
        for process in started.values():
            await process.log_event("ujobs.service.started")
        api = await started["api"].log_event("ujobs.api.listening")
        assert await get(f"http://{api['addresses'][0]}/readyz") == 200
        for name, process in started.items():
            if name != "api":
                listening = await process.log_event("ujobs.metrics.listening")
                assert await get(f"http://{listening['addresses'][0]}/readyz") == 200, name
        # The exporter and the api opened the exports volume, not a /srv/exports of this host.
        assert (tmp_path / "volumes" / "exports").is_dir()

        pool = await asyncpg.create_pool(pg_fresh_dsn, min_size=1, max_size=2)
        assert pool is not None
        try:
            store = postgres_outbox_store(executor=pool)
            async with pool.acquire() as conn, conn.transaction():
                [staged] = await store.stage(
                    conn,
                    [EnqueueRequest(name="greet", input={"n": 7}, idempotency_key="greet:7")],
                )
            # Staged → published by the relay → done by the worker, under the staged id.
            await until_done(pool, "select state = 'done' from x_jobs where id = $1", staged.id)
            # The scheduler fired the user's task; the worker finished what it queued.
            await until_done(
                pool,
                "select count(*) > 0 from x_jobs j join x_task_fires f "
                "on f.task = 'every_second' where j.name = 'greet' and j.state = 'done' "
                "and j.id <> $1",
                staged.id,
            )
        finally:
            await pool.close()
        for process in started.values():
            process.terminate()
        codes = {name: await p.exit_code(60) for name, p in started.items()}
    finally:
        for process in started.values():
            await process.kill()
    assert codes == dict.fromkeys(started, 0)
