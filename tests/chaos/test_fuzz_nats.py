"""Bad input on every NATS subject of a live ``ujobs api`` (the shared NATS, under a prefix of
this test's own): bodies that are not JSON, not UTF-8, not objects, of the wrong shapes, with
NUL bytes, lone surrogates and unicode, near NATS's size cap and deeply nested; no
``Authorization`` header, garbage tokens; unknown jobs and odd subject tokens.

* Request/reply (``ujobs.enqueue.<job>``, ``ujobs.events.<name>``): every message is answered,
  with ``{"error": {"code": "X_…"}}``, never ``X_INTERNAL`` (the unhandled path), never silence.
* JetStream (``ujobs.js.enqueue.<job>``, ``ujobs.js.events.<name>``): every message is
  terminated with its error on ``ujobs.rejected.<job>`` and leaves nothing pending.

Then nothing was written (no job, no event row) and the api still enqueues a good message."""

from __future__ import annotations

import asyncio
import itertools
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import asyncpg
import nats
import orjson
import pytest
from nats.aio.client import Client

from tests.e2e.live_api import TENANT, LiveApi, live_api
from tests.services.nats_support import drop_streams, unique_prefix
from ujobs.services.nats.names import NatsNames

pytestmark = pytest.mark.chaos

JOB = "send_mail"
REPLY_TIMEOUT_S = 10.0
REJECTED_TIMEOUT_S = 60.0
NEAR_CAP = 1_000_000
"""NATS refuses a payload over its ``max_payload`` (1 MiB) at the client; this is just under."""


def _bodies() -> list[tuple[str, bytes]]:
    good_input = {"to": "a@example.com", "subject": "hi", "org_id": TENANT}
    return [
        ("empty", b""),
        ("not json", b"{"),
        ("not utf-8", b'{"input": "\xff\xfe"}'),
        ("null", b"null"),
        ("array", b"[1, 2]"),
        ("string", b'"input"'),
        ("huge number", b'{"input": 1e999}'),
        ("deep", b"[" * 5000 + b"]" * 5000),
        ("input not an object", b'{"input": "x"}'),
        ("wrong field types", orjson.dumps({"input": {**good_input, "to": 1}})),
        ("unknown field", orjson.dumps({"input": good_input, "surprise": True})),
        ("bad options", orjson.dumps({"input": good_input, "runId": 5, "delay": "forever"})),
        ("empty queue", orjson.dumps({"input": good_input, "queue": ""})),
        ("nul", orjson.dumps({"input": {**good_input, "subject": "a\u0000b"}})),
        ("nul payload", orjson.dumps({"payload": {"s": "\u0000 ü 💥 \u202e"}})),
        (
            "lone surrogate",
            b'{"input": {"to": "\\ud800", "subject": "\\udfff", "org_id": "x"}}',
        ),
        ("near the cap", b'{"input": "' + b"a" * NEAR_CAP + b'"}'),
    ]


def _headers(token: str) -> list[tuple[str, dict[str, str]]]:
    good = f"Bearer {token}"
    return [
        ("no header", {}),
        ("garbage token", {"Authorization": "Bearer garbage"}),
        ("basic", {"Authorization": "Basic Zm9vOmJhcg=="}),
        ("long token", {"Authorization": "Bearer " + "a" * 6000}),
        ("non-ascii token", {"Authorization": "Bearer \u00ff\u00fe💥"}),
        ("valid token", {"Authorization": good}),
    ]


@dataclass
class Sweep:
    tried: int = 0
    rejected: int = 0
    bad_answers: list[str] = field(default_factory=list)
    """A reply that is not an ``X_`` error (or is ``X_INTERNAL``), or no reply at all."""


def _x_coded(answer: Any) -> str | None:
    """The ``X_…`` code of an error body that is not the unhandled one, else None."""
    try:
        code = answer["error"]["code"]
    except (KeyError, TypeError):
        return None
    if not isinstance(code, str) or not code.startswith("X_") or code == "X_INTERNAL":
        return None
    return code


def _cases(names: NatsNames, token: str, *, stream: bool) -> Iterator[tuple[str, str, bytes, Any]]:
    """(label, subject, body, headers): every body under every header on every subject."""
    if stream:
        subjects = [
            names.js_enqueue_subject(JOB),
            names.js_enqueue_subject("no.such.job"),
            names.js_event_subject("storm.fuzz"),
        ]
    else:
        subjects = [
            names.enqueue_subject(JOB),
            names.enqueue_subject("no.such.job"),
            names.enqueue_subject("ü💥"),
            names.event_subject("storm.fuzz"),
            names.event_subject("e" * 300),
        ]
    events = (names.event_subject(""), names.js_event_subject(""))
    for subject, (what, body), (who, headers) in itertools.product(
        subjects, _bodies(), _headers(token)
    ):
        if not body and subject.startswith(events) and who == "valid token":
            continue  # an empty event message is ``{}``: a publish with no payload, valid
        if len(body) > NEAR_CAP and who not in ("no header", "valid token"):
            continue  # a megabyte under each garbage token adds time, not cases
        yield f"{subject} [{what}] {who}", subject, body, headers


async def _requests(nc: Client, names: NatsNames, token: str, sweep: Sweep) -> None:
    async def one(label: str, subject: str, body: bytes, headers: dict[str, str]) -> None:
        try:
            reply = await nc.request(subject, body, timeout=REPLY_TIMEOUT_S, headers=headers)
            code = _x_coded(orjson.loads(reply.data))
        except Exception as exc:  # no answer: a hang or a crash
            sweep.bad_answers.append(f"{label}: {type(exc).__name__}")
            return
        if code is None:
            sweep.bad_answers.append(f"{label}: {reply.data[:200]!r}")

    cases = list(_cases(names, token, stream=False))
    sweep.tried += len(cases)
    for start in range(0, len(cases), 16):
        await asyncio.gather(*(one(*case) for case in cases[start : start + 16]))


async def _stream(nc: Client, names: NatsNames, token: str, sweep: Sweep) -> None:
    rejected: asyncio.Queue[Any] = asyncio.Queue()

    async def on_rejected(msg: Any) -> None:
        await rejected.put(orjson.loads(msg.data))

    await nc.subscribe(f"{names.prefix}.rejected.>", cb=on_rejected)
    await nc.flush()
    js = nc.jetstream()
    published: dict[int, str] = {}
    for label, subject, body, headers in _cases(names, token, stream=True):
        ack = await js.publish(subject, body, headers={**headers, "Nats-Msg-Id": uuid.uuid4().hex})
        published[ack.seq] = label
    sweep.tried += len(published)
    try:
        async with asyncio.timeout(REJECTED_TIMEOUT_S):
            while published:
                answer = await rejected.get()
                label = published.pop(int(answer["streamSeq"]), "?")
                sweep.rejected += 1
                if _x_coded(answer) is None:
                    sweep.bad_answers.append(f"{label}: rejected with {answer!r:.200}")
    except TimeoutError:
        sweep.bad_answers += [f"{label}: never rejected" for label in published.values()]
    # The api publishes a refusal, then terminates the message: the last term may still be
    # on its way when the last refusal arrives, so give the consumer a moment to settle.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REPLY_TIMEOUT_S
    while True:
        info = await js.consumer_info(names.enqueue_stream, names.durable)
        settled = not (info.num_pending or info.num_ack_pending)
        if settled or loop.time() > deadline:
            break
        await asyncio.sleep(0.05)
    if not settled or info.num_redelivered:
        sweep.bad_answers.append(f"consumer left work behind: {info}")


async def _sweep(api: LiveApi, url: str, names: NatsNames, dsn: str) -> Sweep:
    sweep = Sweep()
    nc = await nats.connect(url)
    try:
        await _requests(nc, names, api.token, sweep)
        await _stream(nc, names, api.token, sweep)
        conn = await asyncpg.connect(dsn)
        try:
            written = await conn.fetchval(
                "select (select count(*) from x_jobs) + (select count(*) from x_job_events)"
            )
            if written:
                sweep.bad_answers.append(f"{written} rows written by refused messages")
            good = {"input": {"to": "a@example.com", "subject": "hi", "org_id": TENANT}}
            reply = await nc.request(
                names.enqueue_subject(JOB),
                orjson.dumps(good),
                timeout=REPLY_TIMEOUT_S,
                headers={"Authorization": f"Bearer {api.token}"},
            )
            answer = orjson.loads(reply.data)
            if "id" not in answer or await conn.fetchval("select count(*) from x_jobs") != 1:
                sweep.bad_answers.append(f"the api no longer enqueues: {answer!r}")
        finally:
            await conn.close()
    finally:
        await drop_streams(nc, names)
        await nc.drain()
    return sweep


@pytest.mark.timeout(240)
def test_bad_input_on_every_nats_subject_is_an_x_error_never_a_crash(
    pg_dsn: str, nats_url: str
) -> None:
    names = NatsNames(unique_prefix())
    with live_api(pg_dsn, NATS_URL=nats_url, UJOBS_NATS_PREFIX=names.prefix) as api:
        sweep = asyncio.run(_sweep(api, nats_url, names, pg_dsn))
    print(
        f"nats bad input: tried {sweep.tried}, rejected through the stream {sweep.rejected}, "
        f"crashes or bad answers {len(sweep.bad_answers)}"
    )
    assert sweep.tried > 500
    assert sweep.bad_answers == [], "\n".join(sweep.bad_answers)
