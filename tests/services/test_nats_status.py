"""``ujobs nats status``: the streams' documented limits and state, the api's consumer backlog
and the settlements waiting in Postgres, against a real nats-server."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import asyncpg
import nats
import orjson
import pytest

from tests.services.nats_support import drop_streams, unique_prefix
from tests.support.cli import ujobs
from ujobs.services.nats.names import NatsNames
from ujobs.services.nats.streams import ensure_streams


@pytest.fixture
def names(nats_url: str) -> Iterator[NatsNames]:
    chosen = NatsNames(unique_prefix())

    async def setup() -> None:
        nc = await nats.connect(nats_url)
        js = nc.jetstream()
        assert await ensure_streams(js, chosen) == {
            chosen.enqueue_stream: "created",
            chosen.settled_stream: "created",
        }
        # A second start changes nothing; a limit changed by hand is put back.
        assert set((await ensure_streams(js, chosen)).values()) == {"unchanged"}
        info = await js.stream_info(chosen.settled_stream)
        info.config.max_age = 3_600.0
        await js.update_stream(info.config)
        assert (await ensure_streams(js, chosen))[chosen.settled_stream] == "updated"
        await js.publish(chosen.js_enqueue_subject("send_mail"), b"{}")
        await nc.drain()

    async def teardown() -> None:
        nc = await nats.connect(nats_url)
        await drop_streams(nc, chosen)
        await nc.drain()

    asyncio.run(setup())
    yield chosen
    asyncio.run(teardown())


def _pending_settlement(dsn: str) -> None:
    async def insert() -> None:
        conn = await asyncpg.connect(dsn)
        try:
            await conn.execute(
                "insert into x_settlements (job_id, run_id, name, outcome, attempt, settled_at) "
                "values ('j', 'r', 'send_mail', 'completed', 1, now())"
            )
        finally:
            await conn.close()

    asyncio.run(insert())


def test_status_prints_limits_backlog_and_outbox(
    names: NatsNames, nats_url: str, pg_dsn: str
) -> None:
    _pending_settlement(pg_dsn)
    env = {"NATS_URL": nats_url, "UJOBS_NATS_PREFIX": names.prefix}
    result = ujobs("nats", "status", "--json", dsn=pg_dsn, env=env)
    assert result.exit_code == 0, result.output
    doc = orjson.loads(result.stdout)
    enqueue = doc["streams"][names.enqueue_stream]
    assert (enqueue["maxAgeS"], enqueue["maxBytes"], enqueue["duplicateWindowS"]) == (
        604_800,
        1 << 30,
        120,
    )
    assert (enqueue["retention"], enqueue["discard"], enqueue["messages"]) == (
        "workqueue",
        "new",
        1,
    )
    settled = doc["streams"][names.settled_stream]
    assert (settled["maxAgeS"], settled["duplicateWindowS"], settled["retention"]) == (
        604_800,
        600,
        "limits",
    )
    assert doc["requestSubjects"] == [names.enqueue_wildcard, names.events_wildcard]
    assert names.js_enqueue_wildcard in doc["subjectsNote"]
    assert "DESIGN.md" in doc["subjectsNote"]
    assert doc["consumer"]["name"] == names.durable
    assert doc["consumer"]["pending"] == 1
    assert doc["settlements"] == {
        "pending": 1,
        "oldestPendingAtMs": doc["settlements"]["oldestPendingAtMs"],
    }
    table = ujobs("nats", "status", dsn=pg_dsn, env=env)
    assert table.exit_code == 0, table.output
    assert names.enqueue_stream in table.stdout
    assert "settlements waiting for the relay: 1" in table.stdout
    assert f"{names.enqueue_stream} takes {names.js_enqueue_wildcard}" in table.stdout


def test_status_needs_nats_url(pg_dsn: str) -> None:
    result = ujobs("nats", "status", "--json", dsn=pg_dsn, env={"NATS_URL": ""})
    assert result.exit_code == 1
    assert orjson.loads(result.stdout)["error"]["code"] == "X_DRIVER_UNAVAILABLE"
