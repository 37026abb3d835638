"""The "Controlling when jobs run" page's debounce / unique_for example, as pasted, under a
real ``ujobs api`` and ``ujobs worker``: a burst of reindex enqueues over HTTP makes one run
that takes the last input; a digest that completed still dedupes a new enqueue (unique_for)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import orjson
import pytest

from tests.e2e.service_process import ServiceProcess, service_env
from tests.support.docs import marked_block, page
from ujobs.services.api.tokens import TokenStore

pytestmark = pytest.mark.slow


async def _done(pool: asyncpg.Pool[Any], job_id: str) -> asyncpg.Record:
    async with asyncio.timeout(30):
        while True:
            row = await pool.fetchrow("select state, input from x_jobs where id = $1", job_id)
            if row is not None and row["state"] == "done":
                done: asyncpg.Record = row
                return done
            await asyncio.sleep(0.05)


async def test_the_queue_controls_example_runs_as_pasted(
    pg_dsn: str, pg_pool: asyncpg.Pool[Any], tmp_path: Path
) -> None:
    code = marked_block(page("guides/controlling-jobs.md"), "queue-controls")
    assert code.splitlines()[0] == "# app/search.py"
    (tmp_path / "app").mkdir()
    (tmp_path / "app" / "search.py").write_text(code)
    env = service_env(DATABASE_URL=pg_dsn, UJOBS_APP="app.search:api")
    token = (await TokenStore(pg_pool).create(tenant=None, scopes=("enqueue:*",))).secret
    api = await ServiceProcess.start("api", "--port", "0", env=env, cwd=tmp_path)
    worker = await ServiceProcess.start("worker", env=env, cwd=tmp_path)
    try:
        listening = await api.log_event("ujobs.api.listening")
        await worker.log_event("ujobs.service.started")
        url = f"http://{listening['addresses'][0]}"
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=headers) as http:

            async def post(job: str, body: dict[str, Any]) -> Any:
                async with http.post(f"{url}/v1/jobs/{job}", json=body) as answer:
                    assert answer.status == 202, await answer.text()
                    return await answer.json()

            burst = [
                await post("reindex", {"input": {"doc": "d-1", "version": v}}) for v in (1, 2, 3)
            ]
            digest = await post("send_digest", {"input": {"org": "acme"}})
            reindexed = await _done(pg_pool, burst[0]["id"])
            await _done(pg_pool, digest["id"])
            again = await post("send_digest", {"input": {"org": "acme"}})
        worker.terminate()
        api.terminate()
        assert await worker.exit_code(15) == 0
        assert await api.exit_code(15) == 0
    finally:
        await worker.kill()
        await api.kill()
    assert [(b["deduped"], b["debounced"]) for b in burst] == [
        (False, False),
        (True, True),
        (True, True),
    ]
    assert {b["id"] for b in burst} == {burst[0]["id"]}
    assert orjson.loads(reindexed["input"]) == {"doc": "d-1", "version": 3}
    assert (again["id"], again["deduped"], again["debounced"]) == (digest["id"], True, False)
    names = [r["name"] for r in await pg_pool.fetch("select name from x_jobs")]
    assert sorted(names) == ["reindex", "send_digest"]
