"""Hypothesis fuzz of the NATS edge of a live ``ujobs api`` with VALID tokens and hostile
bodies (``tests/chaos/hostile.py``: depth to 4,000, sizes near NATS's 1 MiB cap, invalid UTF-8,
lone surrogates, NUL, wrong types, huge numbers, long tenants, queues, keys and runIds), after
tenant A planted its jobs, runs, steps, export, endpoint and event (``tests/chaos/tenants.py``).
``test_fuzz_nats.py`` sweeps the fixed bad inputs (tokens, shapes, subjects); this one searches.

* Request/reply (``ujobs.enqueue.<job>``, ``ujobs.events.<name>``), with tenant B's token and an
  operator's: every request is answered, with an id or an ``X_…`` code other than
  ``X_INTERNAL``; and no answer to B holds a string of A's that B did not send.
* JetStream (``ujobs.js.enqueue.<job>``, ``ujobs.js.events.<name>``): every message ends, acked
  (its row committed) or terminated with its error to ``ujobs.rejected.<job>``, within
  ``SETTLE_TIMEOUT_S`` and ``DELIVERIES_BOUND`` deliveries (the durable consumer's own counts:
  nothing pending, nothing awaiting an ack, redeliveries bounded); a refusal is an ``X_…`` code
  other than ``X_INTERNAL`` (bad input is not an unexpected error), and no refusal of B's
  message holds a string of A's.

Budget (CI, 2 cores): ``REQUESTS`` + ``STREAM`` examples, no shrinking (the findings are listed,
by kind, instead), a fixed derandomized seed: about 15 s when every message ends, at most
``SETTLE_TIMEOUT_S`` more while some do not (today: about 55 s), under a 300 s timeout."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import nats
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from nats.aio.client import Client

from tests.chaos import hostile
from tests.chaos.tenants import Planted, plant
from tests.e2e.live_api import live_api
from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.services.api.common import status_for
from ujobs.services.config.variables import DEFAULT_NATS_MAX_DELIVERIES
from ujobs.services.nats.names import NatsNames
from ujobs.webhooks.store_pg import new_secret_key

pytestmark = pytest.mark.chaos

APP = "tests.chaos.fuzz_app:api"
REQUESTS = 160
STREAM = 120
SETTLE_TIMEOUT_S = 45.0
REPLY_TIMEOUT_S = 15.0
DELIVERIES_BOUND = DEFAULT_NATS_MAX_DELIVERIES
"""At most this many deliveries of a message that fails unexpectedly (``UJOBS_NATS_MAX_DELIVERIES``,
left at its default here; on average over those messages: the consumer counts deliveries, not
whose they are); a refusal or an ack is one delivery."""
HEADROOM = 4_096
"""NATS counts the headers in its ``max_payload``: a body stays this far under the cap."""
EVENT = "fuzz.hostile"
FUZZ = settings(
    max_examples=REQUESTS,
    deadline=None,
    derandomize=True,
    database=None,
    phases=[Phase.explicit, Phase.generate],
    suppress_health_check=list(HealthCheck),
)


@dataclass
class Findings:
    tried: Counter[str] = field(default_factory=Counter)
    bad: list[str] = field(default_factory=list)

    def add(self, what: str) -> None:
        self.bad.append(what)


def _code(answer: Any) -> str | None:
    try:
        code = answer["error"]["code"]
    except (KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


def _handled(code: str | None) -> bool:
    """An ``X_…`` code of a handled error (``X_INTERNAL`` is the unhandled path)."""
    return code is not None and code.startswith("X_") and code != "X_INTERNAL"


def _cases(planted: Planted, cap: int) -> st.SearchStrategy[tuple[str, str, hostile.Hostile]]:
    """(who, subject kind, body): B's tenant token or the operator's; an enqueue or an event."""
    tenant_b = hostile.enqueues(planted.tenant_b, cap=cap, over=0, long_tenant=False)
    operator = hostile.enqueues(planted.tenant_b, cap=cap, over=0, long_tenant=True)
    events = hostile.events(cap=cap, over=0)
    return st.one_of(
        st.tuples(st.just("tenant"), st.just("enqueue"), tenant_b),
        st.tuples(st.just("operator"), st.just("enqueue"), operator),
        st.tuples(st.sampled_from(["tenant", "operator"]), st.just("event"), events),
    )


class Fuzz:
    def __init__(self, nc: Client, names: NatsNames, planted: Planted, operator: str) -> None:
        self.nc = nc
        self.names = names
        self.planted = planted
        self.tokens = {"tenant": planted.token_b, "operator": operator}
        self.findings = Findings()
        self.published: dict[int, tuple[str, str, bytes]] = {}
        self.rejected: dict[int, Any] = {}

    def headers(self, who: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[who]}"}

    async def request(self, who: str, kind: str, case: hostile.Hostile) -> None:
        subject = (
            self.names.enqueue_subject(hostile.JOB)
            if kind == "enqueue"
            else self.names.event_subject(EVENT)
        )
        label = f"{who} {kind} {case.label}"
        self.findings.tried[case.kind.split(" ")[0]] += 1
        try:
            reply = await self.nc.request(
                subject, case.body, timeout=REPLY_TIMEOUT_S, headers=self.headers(who)
            )
        except Exception as exc:  # no answer: a hang or a crash
            self.findings.add(f"request unanswered: {label}: {type(exc).__name__}")
            return
        try:
            answer = orjson.loads(reply.data)
        except orjson.JSONDecodeError:
            self.findings.add(f"request answer not JSON: {label}: {reply.data[:120]!r}")
            return
        code = _code(answer)
        enqueued = code is None and isinstance(answer, dict) and "id" in answer
        if not (enqueued or _handled(code)):
            self.findings.add(f"request answered {code}: {label}: {reply.data[:160]!r}")
        if who == "tenant" and (leaked := self.planted.leaks(reply.data, case.body)):
            self.findings.add(f"request answer to B holds A's {leaked}: {label}")

    async def publish(self, who: str, kind: str, case: hostile.Hostile) -> None:
        subject = (
            self.names.js_enqueue_subject(hostile.JOB)
            if kind == "enqueue"
            else self.names.js_event_subject(EVENT)
        )
        headers = {**self.headers(who), "Nats-Msg-Id": uuid.uuid4().hex}
        ack = await self.nc.jetstream().publish(subject, case.body, headers=headers)
        self.published[ack.seq] = (f"{who} {kind} {case.label}", who, case.body)

    async def on_rejected(self, msg: Any) -> None:
        answer = orjson.loads(msg.data)
        self.rejected[int(answer["streamSeq"])] = (answer, msg.data)

    async def settle(self) -> None:
        """Until the consumer holds nothing (or ``SETTLE_TIMEOUT_S``); then each message is
        acked or refused, and the consumer's own counts say how."""
        js = self.nc.jetstream()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE_TIMEOUT_S
        last = max(self.published)
        while True:
            info = await js.consumer_info(self.names.enqueue_stream, self.names.durable)
            settled = (
                info.ack_floor.stream_seq >= last
                and not info.num_pending
                and not info.num_ack_pending
            )
            if settled or loop.time() > deadline:
                break
            await asyncio.sleep(0.2)
        await self.nc.flush()
        if not settled:
            self.findings.add(
                f"stream messages unsettled: {info.num_ack_pending} awaiting an ack, "
                f"{info.num_pending} pending, {info.num_redelivered} redelivered after "
                f"{SETTLE_TIMEOUT_S:.0f} s"
            )
        # A refusal or an ack ends a message at its first delivery; only an unexpected error
        # (a 5xx refusal, or none yet) may be delivered again, up to the bound.
        redelivered = info.delivered.consumer_seq - len(self.published)
        failed = sum(
            1 for answer, _ in self.rejected.values() if status_for(_code(answer) or "") >= 500
        )
        retried = failed + (0 if settled else info.num_ack_pending + info.num_pending)
        if redelivered > (DELIVERIES_BOUND - 1) * retried:
            self.findings.add(
                f"stream deliveries unbounded: {redelivered} redeliveries of {retried} "
                f"messages that failed unexpectedly (bound {DELIVERIES_BOUND} deliveries each)"
            )
        for seq, (label, who, body) in self.published.items():
            if seq not in self.rejected:
                continue  # acked: its row committed (the consumer's contract)
            answer, raw = self.rejected[seq]
            code = _code(answer)
            if not _handled(code):
                self.findings.add(f"stream refusal {code}: {label}: {raw[:160]!r}")
            if who == "tenant" and (leaked := self.planted.leaks(raw, body)):
                self.findings.add(f"stream refusal to B holds A's {leaked}: {label}")


def _run_fuzz(loop: asyncio.AbstractEventLoop, fuzz: Fuzz, cap: int) -> None:
    cases = _cases(fuzz.planted, cap)
    first = hostile.tried_first(hostile.landmarks(fuzz.planted.tenant_b, cap=cap))

    @FUZZ
    @given(case=cases)
    @first
    def requests(case: tuple[str, str, hostile.Hostile]) -> None:
        loop.run_until_complete(fuzz.request(*case))

    @settings(FUZZ, max_examples=STREAM)
    @given(case=cases)
    @first
    def publishes(case: tuple[str, str, hostile.Hostile]) -> None:
        loop.run_until_complete(fuzz.publish(*case))

    requests()
    publishes()


async def _open(url: str, names: NatsNames, planted: Planted, operator: str) -> Fuzz:
    nc = await nats.connect(url)
    fuzz = Fuzz(nc, names, planted, operator)
    await nc.subscribe(f"{names.prefix}.rejected.>", cb=fuzz.on_rejected)
    await nc.flush()
    return fuzz


async def _close(fuzz: Fuzz) -> None:
    await drop_streams(fuzz.nc, fuzz.names)
    await fuzz.nc.drain()


@pytest.mark.timeout(300)
def test_hostile_bodies_with_valid_tokens_end_every_nats_message(
    pg_dsn: str, nats_url: str
) -> None:
    names = NatsNames(unique_prefix())
    env = {"NATS_URL": nats_url, "UJOBS_NATS_PREFIX": names.prefix}
    with live_api(pg_dsn, app=APP, UJOBS_SECRET_KEY=new_secret_key(), **env) as api:
        loop = asyncio.new_event_loop()
        try:
            planted = loop.run_until_complete(plant(api.url, pg_dsn))
            fuzz = loop.run_until_complete(_open(nats_url, names, planted, api.token))
            try:
                cap = fuzz.nc.max_payload - HEADROOM
                _run_fuzz(loop, fuzz, cap)
                loop.run_until_complete(fuzz.settle())
            finally:
                loop.run_until_complete(_close(fuzz))
        finally:
            loop.close()
    findings = fuzz.findings
    print(
        f"nats hostile fuzz: requests {REQUESTS}, stream {len(fuzz.published)} "
        f"(refused {len(fuzz.rejected)}), kinds {dict(findings.tried)}, "
        f"findings {len(findings.bad)}"
    )
    assert findings.bad == [], hostile.summary(findings.bad)
