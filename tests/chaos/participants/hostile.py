"""Hostile traffic during the kills, at the storm's rate, against the other families' apis (the
HTTP participant's two and the NATS participant's two, on its private nats-server), in turn:

* deep bodies (``storm.hostile``'s ``data`` nested ``DEPTH`` levels: past the serializer's
  limit, within the parser's) over HTTP, NATS request/reply and the stream — a poison message;
* oversized bodies: past ``UJOBS_API_MAX_BODY_BYTES`` over HTTP, just under NATS's 1 MiB cap
  (and no valid input) over request/reply and the stream; a stream message that is not UTF-8;
* a revoked token: created, used once on every api while live (so each api knows it), revoked,
  then used on and on over HTTP, request/reply and the stream.

An admin token carries the poison: tenancy and scopes pass, the body is what is tested.
Every answer is counted by channel, kind and status or code. Refusals of stream messages are
read back from ``HOSTILE_REJECTED``, a stream of this participant's own on ``ujobs.rejected.>``
(a core subscription would miss those published while the storm restarts nats-server). The
check waits up to ``settle_s`` for the last hostile messages to end, then counts
(``checker.check_hostile``) ``stream_messages_unsettled``, ``answers_5xx`` and
``revoked_accepted``.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import aiohttp
import nats
import orjson
from nats.js.api import AckPolicy, ConsumerConfig, StorageType, StreamConfig

from tests.chaos.checker import check_hostile, server_error
from tests.chaos.hostile import deep
from tests.chaos.participant import StormContext
from tests.chaos.participants.http import HttpEnqueue
from tests.chaos.participants.nats_edge import NAMES, NatsEdgeEnqueue
from ujobs.ids import derived_id
from ujobs.services.api.tokens import TokenStore

if TYPE_CHECKING:
    from nats.aio.client import Client

    from tests.chaos.fleet import Member, Role

JOB = "storm.hostile"
DEPTH = 300
HTTP_OVERSIZE = 1_048_576 + 4_096
"""Past the apis' ``UJOBS_API_MAX_BODY_BYTES`` (its default, 1 MiB): a 413."""
NATS_NEAR_CAP = 1_048_576 - 8_192
"""Under NATS's default ``max_payload`` with room for the headers."""
REJECTED_STREAM = "HOSTILE_REJECTED"
TIMEOUT_S = 10.0
SETTLED_SQL = "select id from x_jobs where id = any($1::text[])"


def stream_job_id(msg_id: str) -> str:
    """The id the api's consumer gives ``storm.hostile`` under ``Nats-Msg-Id: msg_id``."""
    return derived_id(0, "nats-msg-id", NAMES.enqueue_stream, JOB, msg_id)


def _deep_body() -> bytes:
    return b'{"input": {"data": ' + deep(DEPTH) + b"}}"


def _valid_body(n: int) -> bytes:
    return orjson.dumps({"input": {"data": {"n": n}}})


def _code(raw: bytes) -> str | None:
    try:
        code = orjson.loads(raw)["error"]["code"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


class HostileTraffic:
    name = "hostile"

    def __init__(self, http: HttpEnqueue, nats_edge: NatsEdgeEnqueue, *, settle_s: float) -> None:
        self.http = http
        self.nats_edge = nats_edge
        self.settle_s = settle_s
        self.answers: Counter[str] = Counter()
        self.server_errors: list[str] = []
        self.published: dict[str, str] = {}
        """Kind of each stored hostile stream message, by ``Nats-Msg-Id``."""
        self.revoked_msgs: set[str] = set()
        self.revoked_answered: list[str] = []
        self._n = itertools.count()

    def fleet_env(self) -> dict[str, str]:
        return {}

    def roles(self, ctx: StormContext) -> list[tuple[Role, int]]:
        return []

    async def ready(self, ctx: StormContext) -> None:
        """The stream that keeps every refusal (made once; kept across nats-server restarts)."""
        nc = await nats.connect(self.nats_edge.server.url)
        try:
            await nc.jetstream().add_stream(
                StreamConfig(
                    name=REJECTED_STREAM,
                    subjects=[NAMES.rejected_subject(">")],
                    storage=StorageType.FILE,
                )
            )
        finally:
            await nc.close()

    async def victims(self, ctx: StormContext) -> list[Member]:
        """The apis the hostile traffic is aimed at, of both edges."""
        return [m for m in ctx.fleet.alive() if m.role.name.startswith(("api-", "nats-api-"))]

    def _answer(self, what: str, status: int, raw: bytes) -> None:
        code = _code(raw)
        self.answers[f"{what} {code or status}"] += 1
        if server_error(status, code):
            self.server_errors.append(f"{what}: {status} {raw[:160]!r}")

    async def load(self, ctx: StormContext) -> None:
        store = TokenStore(ctx.pool)
        admin = await store.create(tenant=None, scopes=["admin"], name="storm-hostile")
        revoked = await store.create(tenant=None, scopes=["admin"], name="storm-hostile-revoked")
        urls = [f"http://127.0.0.1:{p}/v1/jobs/{JOB}" for p in self.http.ports]
        nc = await nats.connect(
            self.nats_edge.server.url, max_reconnect_attempts=-1, reconnect_time_wait=0.2
        )
        timeout = aiohttp.ClientTimeout(total=TIMEOUT_S)
        try:
            async with aiohttp.ClientSession(timeout=timeout) as http:
                good = {"Authorization": f"Bearer {admin.secret}"}
                bad = {"Authorization": f"Bearer {revoked.secret}"}
                # Known live to every api first (a request on each, a stream message), then
                # revoked: what an api remembers of a token must not outlive its revocation.
                for url in urls:
                    await self._post(http, url, bad, _valid_body(next(self._n)), "warm")
                for _ in range(4):
                    await self._request(nc, bad, _valid_body(next(self._n)), "warm")
                await store.revoke(revoked.record.id)
                actions = self._actions(http, nc, urls, good, bad)
                for action in itertools.cycle(actions):
                    if not await ctx.pace():
                        break
                    await action()
        finally:
            await nc.close()

    def _actions(
        self,
        http: aiohttp.ClientSession,
        nc: Client,
        urls: list[str],
        good: dict[str, str],
        bad: dict[str, str],
    ) -> list[Callable[[], Awaitable[None]]]:
        url = itertools.cycle(urls)
        oversize = b'{"input": "' + b"a" * HTTP_OVERSIZE + b'"}'
        near_cap = b'{"input": "' + b"a" * NATS_NEAR_CAP + b'"}'
        return [
            lambda: self._post(http, next(url), good, _deep_body(), "http deep"),
            lambda: self._request(nc, good, _deep_body(), "nats deep"),
            lambda: self._publish(nc, good, _deep_body(), "deep"),
            lambda: self._post(http, next(url), good, oversize, "http oversized"),
            lambda: self._request(nc, good, near_cap, "nats oversized"),
            lambda: self._publish(nc, good, near_cap, "oversized"),
            lambda: self._publish(nc, good, b'{"input": {"data": "\xff\xfe"}}', "not utf-8"),
            lambda: self._post(http, next(url), bad, _valid_body(next(self._n)), "http revoked"),
            lambda: self._request(nc, bad, _valid_body(next(self._n)), "nats revoked"),
            lambda: self._publish(nc, bad, _valid_body(next(self._n)), "revoked"),
        ]

    async def _post(
        self, http: aiohttp.ClientSession, url: str, headers: dict[str, str], body: bytes, what: str
    ) -> None:
        try:
            async with http.post(
                url, data=body, headers={**headers, "Content-Type": "application/json"}
            ) as reply:
                raw = await reply.read()
                status = reply.status
        except (TimeoutError, aiohttp.ClientError):
            self.answers[f"{what} refused"] += 1  # an api killed or starting: no answer
            return
        self._answer(what, status, raw)
        if what == "http revoked" and status == 202:
            self.revoked_answered.append(f"{what}: {raw[:120]!r}")

    async def _request(self, nc: Client, headers: dict[str, str], body: bytes, what: str) -> None:
        try:
            reply = await nc.request(
                NAMES.enqueue_subject(JOB), body, timeout=TIMEOUT_S, headers=headers
            )
        except Exception as exc:  # no responders, nats-server restarting: no answer
            self.answers[f"{what} {type(exc).__name__}"] += 1
            return
        self._answer(what, 200, reply.data)
        if what == "nats revoked" and b'"id"' in reply.data and _code(reply.data) is None:
            self.revoked_answered.append(f"{what}: {reply.data[:120]!r}")

    async def _publish(self, nc: Client, headers: dict[str, str], body: bytes, what: str) -> None:
        msg_id = f"hostile:{next(self._n)}:{time.time_ns()}"
        try:
            await nc.jetstream(timeout=TIMEOUT_S).publish(
                NAMES.js_enqueue_subject(JOB), body, headers={**headers, "Nats-Msg-Id": msg_id}
            )
        except Exception as exc:  # no publish ack: not stored as far as anyone knows
            self.answers[f"stream {what} {type(exc).__name__}"] += 1
            return
        self.answers[f"stream {what} stored"] += 1
        self.published[msg_id] = what
        if what == "revoked":
            self.revoked_msgs.add(msg_id)

    async def _refused(self, nc: Client) -> dict[str, str]:
        """Every refusal kept in ``HOSTILE_REJECTED``: its code, by ``Nats-Msg-Id``."""
        js = nc.jetstream()
        total = (await js.stream_info(REJECTED_STREAM)).state.messages
        refused: dict[str, str] = {}
        if not total:
            return refused
        sub = await js.pull_subscribe(
            NAMES.rejected_subject(">"),
            stream=REJECTED_STREAM,
            config=ConsumerConfig(ack_policy=AckPolicy.NONE),
        )
        read = 0
        while read < total:
            for msg in await sub.fetch(batch=1000, timeout=10):
                read += 1
                answer = orjson.loads(msg.data)
                if answer.get("msgId") in self.published:
                    refused[answer["msgId"]] = str(_code(msg.data))
        await sub.unsubscribe()
        return refused

    async def _settled(self, ctx: StormContext, nc: Client) -> tuple[dict[str, str], set[str]]:
        """(refused, landed), waiting up to ``settle_s`` for every hostile message to end."""
        by_job = {stream_job_id(m): m for m in self.published}
        deadline = time.monotonic() + self.settle_s
        while True:
            refused = await self._refused(nc)
            rows = await ctx.pool.fetch(SETTLED_SQL, list(by_job))
            landed = {by_job[r["id"]] for r in rows}
            if all(m in refused or m in landed for m in self.published):
                return refused, landed
            if time.monotonic() > deadline:
                return refused, landed
            await asyncio.sleep(0.5)

    async def check(self, ctx: StormContext) -> dict[str, Any]:
        nc = await nats.connect(self.nats_edge.server.url)
        try:
            refused, landed = await self._settled(ctx, nc)
        finally:
            await nc.close()
        return check_hostile(
            self.published,
            refused,
            landed,
            self.answers,
            self.server_errors,
            self.revoked_msgs,
            self.revoked_answered,
        )
