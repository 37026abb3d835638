"""The reliability storm in full (issue 29): ONE JSON line of figures.

Every server here is PRIVATE (``tests/support/restartable.py``): a Postgres ``initdb``-ed into
a temporary directory and redis-servers, each on a free port; the shared servers are never
touched. The services are real ``ujobs`` processes running ``tests/chaos/storm_app.py``.

1. The Postgres storm (``tests.chaos.harness``): ``STORM_WORKERS`` workers, two relays, two
   schedulers, two ``ujobs api`` on HTTP and two on a private nats-server, two webhook
   deliverers and two exporters; Python-driver enqueues, HTTP enqueues, NATS request/reply
   and JetStream enqueues, outbox stagings (a business row and its job in one transaction)
   and webhook events at ``STORM_RATE`` a second each, an export every two seconds, a cron
   task every second; for ``STORM_BUDGET_S`` seconds, ``STORM_KILLS`` SIGKILLs (workers,
   relays, the scheduler leader, the apis, the deliverers, the exporters in turn),
   ``STORM_RESTARTS`` Postgres restarts, ``STORM_NATS_RESTARTS`` nats-server restarts and
   ``STORM_STOPS`` workers frozen past their lease; and, all along, hostile traffic at the
   same rate (poison stream messages, deep and oversized bodies over HTTP and NATS, a revoked
   token kept in use). Then a drain and the checks: ``lost``,
   ``stuck``, ``completed_twice``, ``steps_rerun`` (and how many no kill, freeze or restart
   explains), ``occurrences_missed``/``doubled``, ``outbox_lost``/``doubled``,
   ``settlements_lost``, ``webhook_ledger_double_counted``, ``export_parts_corrupt``,
   ``stream_messages_unsettled`` and ``answers_5xx`` (hostile stream messages neither landed
   nor refused by the end; 5xx or ``X_INTERNAL`` answers to hostile traffic),
   ``revoked_accepted``, ``p99_pickup_ms_during_storm``.
2. The Redis driver storm (``tests.chaos.redis_storm``), with AOF (``everysec``) and without
   persistence: ``redis_aof_lost`` and ``redis_noaof_lost``, redis-server SIGKILLed
   ``STORM_REDIS_RESTARTS`` times each.

``pass`` is true when every figure of ``tests.chaos.checker.ZERO_FIGURES`` is 0 (``failing``
names the others). Run: ``.venv/bin/python bench/storm.py``; the line goes to the docs'
Reliability page (docs/concepts/reliability.md) and ``bench/RESULTS.md`` by hand. The bounded
form is ``tests/chaos/test_storm.py``.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _path in (str(ROOT), str(HERE)):
    if _path not in sys.path:
        sys.path.insert(0, _path)

from tests.chaos.checker import ZERO_FIGURES  # noqa: E402
from tests.chaos.harness import PG_SETTINGS, StormConfig, run_storm  # noqa: E402
from tests.chaos.participant import Participant  # noqa: E402
from tests.chaos.participants.cron import CronTask  # noqa: E402
from tests.chaos.participants.direct import DirectEnqueue  # noqa: E402
from tests.chaos.participants.exports import ExportRuns  # noqa: E402
from tests.chaos.participants.hostile import HostileTraffic  # noqa: E402
from tests.chaos.participants.http import HttpEnqueue  # noqa: E402
from tests.chaos.participants.nats_edge import NatsEdgeEnqueue  # noqa: E402
from tests.chaos.participants.outbox import OutboxEnqueue  # noqa: E402
from tests.chaos.participants.webhooks import WebhookDeliveries  # noqa: E402
from tests.chaos.redis_storm import redis_storm  # noqa: E402
from tests.support.restartable import PrivateNats, PrivatePostgres  # noqa: E402

HOSTILE_SETTLE_S = 60.0
"""How long the check waits for the last hostile stream messages to end (refused or landed)."""


def config_from_env() -> StormConfig:
    env = os.environ
    return StormConfig(
        budget_s=float(env.get("STORM_BUDGET_S", "300")),
        kills=int(env.get("STORM_KILLS", "100")),
        pg_restarts=int(env.get("STORM_RESTARTS", "4")),
        stops=int(env.get("STORM_STOPS", "4")),
        workers=int(env.get("STORM_WORKERS", "3")),
        rate_per_s=float(env.get("STORM_RATE", "20")),
        drain_timeout_s=float(env.get("STORM_DRAIN_S", "180")),
    )


def logs_dir(pg: PrivatePostgres) -> Path:
    """``STORM_LOGS`` (kept after the run), else inside the private cluster's directory."""
    logs = Path(os.environ.get("STORM_LOGS", str(pg.workdir / "logs")))
    logs.mkdir(parents=True, exist_ok=True)
    return logs


async def main() -> None:
    config = config_from_env()
    redis_restarts = int(os.environ.get("STORM_REDIS_RESTARTS", "3"))
    nats_restarts = int(os.environ.get("STORM_NATS_RESTARTS", "2"))
    figures: dict[str, Any] = {}
    with PrivatePostgres(settings=PG_SETTINGS) as pg, PrivateNats() as nats_server:
        logs = logs_dir(pg)
        http = HttpEnqueue()
        nats_edge = NatsEdgeEnqueue(nats_server, restarts=nats_restarts, over_s=config.budget_s)
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
        figures |= await run_storm(pg, participants, config, logs)
        for aof in (True, False):
            figures |= await redis_storm(pg, logs, aof=aof, restarts=redis_restarts, budget_s=30)
    failing = [key for key in ZERO_FIGURES if figures.get(key)]
    print(
        json.dumps(
            {
                **figures,
                "budget_s": config.budget_s,
                "workers": config.workers,
                "pass": not failing,
                "failing": failing,
            }
        )
    )


if __name__ == "__main__":
    from harness_run import bench_lock

    with bench_lock():
        asyncio.run(main())
