"""The storm in a bounded form (``bench/storm.py`` runs it in full): real ``ujobs`` workers,
relays, schedulers, apis (HTTP and NATS, on a private nats-server restarted once), webhook
deliverers and exporters on a private Postgres under SIGKILLs, a Postgres restart and a worker
frozen past its lease, while hostile traffic (poison stream messages, deep and oversized bodies,
a revoked token) hits both edges, then every target checked from the ledger; and the Redis
driver with an append-only file under redis-server SIGKILLs."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.chaos.checker import ZERO_FIGURES
from tests.chaos.harness import StormConfig, run_storm
from tests.chaos.participant import Participant
from tests.chaos.participants.cron import CronTask
from tests.chaos.participants.direct import DirectEnqueue
from tests.chaos.participants.exports import ExportRuns
from tests.chaos.participants.hostile import HostileTraffic
from tests.chaos.participants.http import HttpEnqueue
from tests.chaos.participants.nats_edge import NatsEdgeEnqueue
from tests.chaos.participants.outbox import OutboxEnqueue
from tests.chaos.participants.webhooks import WebhookDeliveries
from tests.chaos.redis_storm import redis_storm
from tests.support.restartable import PrivateNats, PrivatePostgres

pytestmark = [pytest.mark.chaos, pytest.mark.slow]

BOUNDED = StormConfig(
    budget_s=20, kills=8, pg_restarts=1, stops=1, workers=2, rate_per_s=10, drain_timeout_s=40
)


HOSTILE_SETTLE_S = 20.0
"""How long the check waits for the last hostile stream messages to end (refused or landed)."""


@pytest.mark.timeout(230)
async def test_a_bounded_storm_loses_nothing_and_runs_nothing_twice(
    private_pg: PrivatePostgres,
) -> None:
    logs = private_pg.workdir / "logs"
    logs.mkdir()
    with PrivateNats() as nats_server:
        http = HttpEnqueue()
        nats_edge = NatsEdgeEnqueue(nats_server, restarts=1, over_s=BOUNDED.budget_s)
        participants: list[Participant] = [
            DirectEnqueue(),
            OutboxEnqueue(),
            CronTask(),
            http,
            nats_edge,
            WebhookDeliveries(),
            ExportRuns(),
            HostileTraffic(http, nats_edge, settle_s=HOSTILE_SETTLE_S),
        ]
        async with asyncio.timeout(180):
            figures = await run_storm(private_pg, participants, BOUNDED, logs)
    # The storm did what it says: every kill landed (a worker, a relay, the scheduler
    # leader, an api of each edge, a deliverer, an exporter in turn), Postgres came back once,
    # nats-server once, one worker thawed past its lease.
    assert (figures["kills"], figures["restarts"], figures["stops"]) == (8, 1, 1)
    assert figures["nats_restarts"] == 1
    assert figures["exits"] == []  # a replacement Postgres refused at start is not an exit
    for source in ("direct", "outbox", "http", "nats-request", "nats-stream", "exports"):
        assert figures["acked"].get(source, 0) > 0, (source, figures["acked"])
    assert figures["webhook_acked"] > 0
    assert figures["exports_done"] > 0
    assert figures["drained_s"] is not None
    assert figures["hostile_stream_published"] > 0, figures["hostile_answers"]
    summary = {key: figures[key] for key in ZERO_FIGURES}
    print(f"bounded storm: {json.dumps(figures, default=str)}")
    failing = {key: value for key, value in summary.items() if value}
    hostile = {
        key: figures[key]
        for key in ("answers_5xx_sample", "stream_messages_unsettled_kinds", "hostile_answers")
    }
    assert failing == {}, (failing, hostile)
    assert figures["occurrences"] >= 15


@pytest.mark.timeout(120)
async def test_the_redis_driver_with_an_append_only_file_loses_nothing_across_kills(
    private_pg: PrivatePostgres,
) -> None:
    logs = private_pg.workdir / "logs"
    async with asyncio.timeout(100):
        figures = await redis_storm(
            private_pg, logs, aof=True, budget_s=10, restarts=1, rate_per_s=10
        )
    assert figures["redis_aof_acked"] > 0
    assert figures["redis_aof_lost"] == 0, figures
