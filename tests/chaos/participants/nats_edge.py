"""The NATS edge: two ``ujobs api`` processes connected to a PRIVATE ``nats-server -js`` (never
the shared one), enqueuing ``storm.work`` by request/reply on ``ujobs.enqueue.storm.work`` and
fire-and-forget through JetStream (``ujobs.js.enqueue.storm.work``, one ``Nats-Msg-Id`` a
message); the storm SIGKILLs the apis, and this participant restarts nats-server itself
(a clean stop and start on the same store) ``restarts`` times over ``over_s`` seconds.

Every process of the storm writes the settlements outbox (``UJOBS_NATS_SETTLEMENTS=on``) and
the apis relay it to ``UJOBS_SETTLED``. Acknowledged means a reply with the job's id (request)
or the stream's publish ack (JetStream: the job's id is the one the consumer derives from the
message id). ``settlements_lost``: a job settled (done, failed, dead) when the check began with
no message of that outcome on ``UJOBS_SETTLED`` once the relays published every settlement
written by then. The scheduler fires on while the check runs, so the settled jobs and the
outbox's last ``seq`` are read in one snapshot first: a tick settled after it is neither
expected on the stream nor waited for.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

import nats
import orjson
from nats.js.api import AckPolicy, ConsumerConfig

from tests.chaos.fleet import Role, service_env
from tests.chaos.participant import StormContext
from tests.support.servers import free_port
from ujobs.ids import derived_id
from ujobs.services.api.tokens import TokenStore
from ujobs.services.nats.names import NatsNames

if TYPE_CHECKING:
    from nats.aio.client import Client

    from tests.chaos.fleet import Member
    from tests.support.restartable import PrivateNats

APIS = 2
JOB = "storm.work"
REQUEST_TIMEOUT_S = 5.0
CATCH_UP_S = 60.0
OUTCOME = {"done": "completed", "failed": "failed", "dead": "dead"}
"""The settlement message's ``outcome`` a job's final state stands for."""
SETTLED_JOBS = "select id, state from x_jobs where state = any($1::text[])"
LAST_SEQ = "select coalesce(max(seq), 0) from x_settlements"
UNPUBLISHED = "select count(*) from x_settlements where published_at is null and seq <= $1"
NAMES = NatsNames()


def stream_job_id(msg_id: str) -> str:
    """The job id the api's consumer gives a stream message with ``Nats-Msg-Id: msg_id``
    (``ujobs.services.nats.consumer.stream_job_id``: the contract a producer can rely on)."""
    return derived_id(0, "nats-msg-id", NAMES.enqueue_stream, JOB, msg_id)


class NatsEdgeEnqueue:
    name = "nats"

    def __init__(self, server: PrivateNats, *, restarts: int, over_s: float) -> None:
        self.server = server
        self.restarts = restarts
        self.over_s = over_s
        self.ports = [free_port() for _ in range(APIS)]
        self.answers: dict[str, int] = {}
        self.nats_restarts = 0

    def fleet_env(self) -> dict[str, str]:
        return {"UJOBS_NATS_SETTLEMENTS": "on"}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        env = service_env(ctx.url, NATS_URL=self.server.url, UJOBS_NATS_ACK_WAIT_MS="3000")
        return [
            (Role(f"nats-api-{i}", ("api", "--port", str(port)), env), 1)
            for i, port in enumerate(self.ports)
        ]

    async def ready(self, ctx: StormContext) -> None:
        """Until an api answers a request (an enqueue without a token: its error will do)."""
        nc = await nats.connect(self.server.url)
        try:
            while True:
                try:
                    await nc.request(NAMES.enqueue_subject(JOB), b"{}", timeout=2)
                    return
                except Exception:  # no responders yet, or a timeout
                    await asyncio.sleep(0.2)
        finally:
            await nc.close()

    async def victims(self, ctx: StormContext) -> list[Member]:
        return [m for m in ctx.fleet.alive() if m.role.name.startswith("nats-api-")]

    def _count(self, answer: str) -> None:
        self.answers[answer] = self.answers.get(answer, 0) + 1

    async def load(self, ctx: StormContext) -> None:
        token = await TokenStore(ctx.pool).create(tenant=None, scopes=["admin"], name="storm-nats")
        headers = {"Authorization": f"Bearer {token.secret}"}
        nc = await nats.connect(self.server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2)
        restarting = asyncio.create_task(self._restart_server(ctx))
        try:
            await asyncio.gather(
                self._requests(ctx, nc, headers), self._publishes(ctx, nc, headers)
            )
        finally:
            await restarting
            await nc.close()

    async def _restart_server(self, ctx: StormContext) -> None:
        began = time.monotonic()
        for i in range(self.restarts):
            at = began + self.over_s * (i + 0.6) / self.restarts
            try:
                await asyncio.wait_for(ctx.stopping.wait(), max(0.0, at - time.monotonic()))
                return
            except TimeoutError:
                pass
            await asyncio.to_thread(self.server.restart)
            self.nats_restarts += 1

    async def _requests(self, ctx: StormContext, nc: Client, headers: dict[str, str]) -> None:
        source, n = f"{self.name}-request", 0
        while await ctx.pace():
            body = {"input": {"src": source, "n": n, "at_ms": int(time.time() * 1000)}}
            n += 1
            try:
                reply = await nc.request(
                    NAMES.enqueue_subject(JOB),
                    orjson.dumps(body),
                    timeout=REQUEST_TIMEOUT_S,
                    headers=headers,
                )
                answer = orjson.loads(reply.data)
            except Exception as exc:  # NATS restarting, no api listening: not acknowledged
                self._count(type(exc).__name__)
                ctx.error(source)
                continue
            if "id" in answer:
                self._count("id")
                ctx.ack(source, answer["id"])
            else:
                self._count(str(answer.get("error", {}).get("code")))
                ctx.error(source)

    async def _publishes(self, ctx: StormContext, nc: Client, headers: dict[str, str]) -> None:
        source, n = f"{self.name}-stream", 0
        js = nc.jetstream(timeout=REQUEST_TIMEOUT_S)
        while await ctx.pace():
            body = {"input": {"src": source, "n": n, "at_ms": int(time.time() * 1000)}}
            msg_id = f"{source}:{n}"
            n += 1
            try:
                await js.publish(
                    NAMES.js_enqueue_subject(JOB),
                    orjson.dumps(body),
                    headers={**headers, "Nats-Msg-Id": msg_id},
                )
            except Exception as exc:  # no publish ack: not acknowledged (maybe stored)
                self._count(f"stream:{type(exc).__name__}")
                ctx.error(source)
                continue
            self._count("stream:acked")
            ctx.ack(source, stream_job_id(msg_id))

    async def _caught_up(self, ctx: StormContext, last_seq: int) -> bool:
        """Until every settlement up to ``last_seq`` is published (False: not within
        ``CATCH_UP_S``)."""
        deadline = time.monotonic() + CATCH_UP_S
        while time.monotonic() < deadline:
            if await ctx.pool.fetchval(UNPUBLISHED, last_seq) == 0:
                return True
            await asyncio.sleep(0.5)
        return False

    async def _settled_messages(self) -> tuple[set[tuple[str, str]], int]:
        """Every (job id, outcome) on ``UJOBS_SETTLED``, and how many messages it holds."""
        nc = await nats.connect(self.server.url)
        try:
            js = nc.jetstream()
            total = (await js.stream_info(NAMES.settled_stream)).state.messages
            sub = await js.pull_subscribe(
                NAMES.settled_wildcard,
                stream=NAMES.settled_stream,
                config=ConsumerConfig(ack_policy=AckPolicy.NONE),
            )
            seen: set[tuple[str, str]] = set()
            read = 0
            while read < total:
                for msg in await sub.fetch(batch=1000, timeout=10):
                    body = orjson.loads(msg.data)
                    seen.add((body["id"], body["outcome"]))
                    read += 1
            await sub.unsubscribe()
            return seen, total
        finally:
            await nc.close()

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        async with ctx.pool.acquire() as conn, conn.transaction(isolation="repeatable_read"):
            jobs = await conn.fetch(SETTLED_JOBS, list(OUTCOME))
            last_seq = int(await conn.fetchval(LAST_SEQ))
        caught_up = await self._caught_up(ctx, last_seq)
        seen, total = await self._settled_messages()
        missing = [r["id"] for r in jobs if (r["id"], OUTCOME[r["state"]]) not in seen]
        return {
            "nats_answers": dict(sorted(self.answers.items())),
            "nats_restarts": self.nats_restarts,
            "settlements_relayed": caught_up,
            "settlements_published": total,
            "settlements_lost": len(missing),
            "settlements_lost_ids": missing[:10],
        }
