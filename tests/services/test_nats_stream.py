"""The enqueue stream's durable pull consumer against a real nats-server and Postgres: ack
after commit, the id derived from ``Nats-Msg-Id`` or the stream sequence (a redelivery
enqueues nothing new), refusals terminated and published to ``<prefix>.rejected.<job>``."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import orjson
import pytest
from nats.aio.msg import Msg
from nats.errors import NotJSMessageError

from tests.services.api_support import ORG_A, ORG_B, MakeClient, mail
from tests.services.nats_support import (
    CountedLookup,
    InProcess,
    away_pool,
    in_process,
    start_nats_api,
)
from ujobs.ids import derived_id
from ujobs.services.nats.consumer import reply_position, stream_job_id


async def _rows(pool: asyncpg.Pool[Any]) -> list[asyncpg.Record]:
    return list(await pool.fetch("select * from x_jobs order by id"))


async def _listen(ip: InProcess, subject: str) -> asyncio.Queue[dict[str, Any]]:
    got: asyncio.Queue[dict[str, Any]] = asyncio.Queue()

    async def cb(msg: Msg) -> None:
        await got.put(orjson.loads(msg.data))

    await ip.nc.subscribe(subject, cb=cb)
    await ip.nc.flush()
    return got


async def _stream_messages(ip: InProcess) -> int:
    info = await ip.js.stream_info(ip.names.enqueue_stream)
    return int(info.state.messages)


async def test_messages_become_rows_with_derived_ids_then_leave_the_stream(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async with in_process(pg_pool, nats_url) as ip:
        issued = await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])
        subject = ip.names.js_enqueue_subject("send_mail")
        await ip.publish(subject, {"input": mail(subject="a")}, issued.secret, msg_id="order-1")
        await ip.publish(subject, {"input": mail(subject="b")}, issued.secret)
        assert await ip.consumer.run_once() == 2
        assert ip.consumer.acked == 2
        rows = await _rows(pg_pool)
        assert {r["idempotency_key"] for r in rows} == {
            "mail:a@example.com:a",
            "mail:a@example.com:b",
        }
        assert all(r["enqueued_by"] == issued.record.id for r in rows)
        assert all(r["tenant_id"] == ORG_A for r in rows)
        assert await _stream_messages(ip) == 0  # acked: gone from the work queue


def _metadata_job_id(job: str, msg: Msg) -> str:
    """The id as the first release derived it, through nats-py's parsed ``msg.metadata``."""
    msg_id = (msg.headers or {}).get("Nats-Msg-Id")
    md = msg.metadata
    if msg_id:
        return derived_id(0, "nats-msg-id", md.stream, job, msg_id)
    stamp = int(md.timestamp.timestamp() * 1000)
    return derived_id(stamp, "nats-seq", md.stream, str(md.sequence.stream))


@pytest.mark.parametrize(
    "reply",
    [
        "$JS.ACK.T1_ENQUEUE.t1-api.1.42.40.1733370000123456789.7",
        "$JS.ACK.T1_ENQUEUE.t1-api.3.42.90.1733370000999999999.0",
        "$JS.ACK.hub.ACCHASH.T1_ENQUEUE.t1-api.1.42.40.1733370000000499999.7.r4nd",
        "$JS.ACK.hub.ACCHASH.T1_ENQUEUE.t1-api.1.42.40.1733370000000500000.7",
    ],
)
@pytest.mark.parametrize("msg_id", [None, "order-1"])
def test_the_derived_id_is_the_one_metadata_gives(reply: str, msg_id: str | None) -> None:
    # A message delivered before an upgrade and again after it must meet its own row.
    headers = None if msg_id is None else {"Nats-Msg-Id": msg_id}
    msg = Msg(_client=None, subject="t1.js.enqueue.notify", reply=reply, headers=headers)  # type: ignore[arg-type]
    assert stream_job_id("notify", msg) == _metadata_job_id("notify", msg)


def test_a_message_that_is_not_from_a_stream_has_no_position() -> None:
    with pytest.raises(NotJSMessageError):
        reply_position("_INBOX.abc.def")


async def test_a_redelivered_message_enqueues_nothing_new(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async with in_process(pg_pool, nats_url) as ip:
        token = (await ip.tokens.create(tenant=None, scopes=["enqueue:*"])).secret
        subject = ip.names.js_enqueue_subject("notify")
        # Two different inputs: only the derived id, not the job's idempotency key, can
        # make the second delivery of each meet the first delivery's row.
        await ip.publish(subject, {"input": {"user_id": ORG_A, "items": []}}, token, msg_id="m-1")
        await ip.publish(subject, {"input": {"user_id": ORG_B, "items": []}}, token)
        sub = await ip.js.pull_subscribe_bind(
            durable=ip.names.durable, stream=ip.names.enqueue_stream
        )
        first = await sub.fetch(batch=2, timeout=5)
        ids = set()
        for msg in first:
            # The row commits, then the api dies before its ack: the message comes back.
            answer = await ip.edge.enqueue(
                "notify", msg.data, f"Bearer {token}", job_id=stream_job_id("notify", msg)
            )
            ids.add(answer["id"])
            await msg.nak()
        await sub.unsubscribe()
        # The user_id dedupes nothing here: two rows, and the same two after the redelivery.
        await pg_pool.execute("update x_jobs set idempotency_key = id")
        assert await ip.consumer.run_once() == 2
        rows = await _rows(pg_pool)
        assert {r["id"] for r in rows} == ids
        assert len(rows) == 2
        assert ip.consumer.acked == 2


async def test_one_msg_id_is_one_job_even_past_the_duplicate_window(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async with in_process(pg_pool, nats_url) as ip:
        token = (await ip.tokens.create(tenant=None, scopes=["enqueue:*"])).secret
        subject = ip.names.js_enqueue_subject("notify")
        info = await ip.js.stream_info(ip.names.enqueue_stream)
        info.config.duplicate_window = 0.2
        await ip.js.update_stream(info.config)
        first = await ip.publish(
            subject, {"input": {"user_id": ORG_A, "items": []}}, token, msg_id="x"
        )
        assert await ip.consumer.run_once() == 1
        await pg_pool.execute("update x_jobs set state = 'done', idempotency_key = 'old'")
        await asyncio.sleep(0.5)  # past the window: JetStream stores the same id again
        again = await ip.publish(
            subject, {"input": {"user_id": ORG_A, "items": []}}, token, msg_id="x"
        )
        assert again > first
        assert await ip.consumer.run_once() == 1
        assert len(await _rows(pg_pool)) == 1  # the derived id met the first row


@pytest.mark.parametrize(
    ("job", "body", "scopes", "tenant", "code"),
    [
        ("send_mail", {"input": {"to": 1}}, ["enqueue:*"], None, "X_INPUT_INVALID"),
        ("send_mail", {"input": mail(), "priority": -1}, ["enqueue:*"], None,
         "X_PRIORITY_INVALID"),
        ("send_mail", {"input": mail()}, None, None, "X_UNAUTHORIZED"),
        ("send_mail", {"input": mail()}, ["enqueue:notify"], ORG_A, "X_FORBIDDEN"),
        ("send_mail", {"input": mail(ORG_A)}, ["enqueue:*"], ORG_B, "X_TENANCY_ACTOR_MISMATCH"),
        ("nope", {"input": {}}, ["enqueue:*"], None, "X_JOB_UNKNOWN"),
        # A redelivery meets its own row as a dedupe: the stream form takes no onConflict.
        ("send_mail", {"input": mail(ORG_A), "onConflict": "error"}, ["enqueue:*"], None,
         "X_INPUT_INVALID"),
    ],
)  # fmt: skip
async def test_a_refused_message_is_terminated_and_its_error_published(
    pg_pool: asyncpg.Pool[Any],
    nats_url: str,
    job: str,
    body: dict[str, Any],
    scopes: list[str] | None,
    tenant: str | None,
    code: str,
) -> None:
    async with in_process(pg_pool, nats_url) as ip:
        token = None
        if scopes is not None:
            token = (await ip.tokens.create(tenant=tenant, scopes=scopes)).secret
        rejected = await _listen(ip, ip.names.rejected_subject(job))
        seq = await ip.publish(ip.names.js_enqueue_subject(job), body, token, msg_id="p-7")
        assert await ip.consumer.run_once() == 1
        got = await asyncio.wait_for(rejected.get(), 5)
        assert got["error"]["code"] == code
        assert (got["streamSeq"], got["msgId"]) == (seq, "p-7")
        assert got["subject"] == ip.names.js_enqueue_subject(job)
        assert ip.consumer.refused == 1
        assert await _rows(pg_pool) == []
        # Terminated: not delivered again, and gone from the work queue.
        assert await ip.consumer.run_once(timeout_s=0.5) == 0
        assert await _stream_messages(ip) == 0


async def test_a_cached_token_is_not_read_again_and_a_revoke_still_refuses_the_next_batch(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    """The consumer reads tokens as the single enqueue does: a token seen live is not read
    again (``KnownTokens``), its liveness is checked just before the batch's insert, so the
    batch after a revoke refuses that token's message and still queues the others'."""
    async with in_process(pg_pool, nats_url, cached_tokens=True) as ip:
        assert isinstance(ip.edge.tokens, CountedLookup)
        assert ip.edge.known is not None
        kept = await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])
        doomed = await ip.tokens.create(tenant=ORG_A, scopes=["enqueue:send_mail"])
        subject = ip.names.js_enqueue_subject("send_mail")
        await ip.publish(subject, {"input": mail(subject="k1")}, kept.secret)
        await ip.publish(subject, {"input": mail(subject="d1")}, doomed.secret)
        assert await ip.consumer.run_once() == 2
        assert (ip.consumer.acked, ip.edge.tokens.reads) == (2, 2)

        await ip.publish(subject, {"input": mail(subject="k2")}, kept.secret)
        assert await ip.consumer.run_once() == 1
        assert (ip.consumer.acked, ip.edge.tokens.reads) == (3, 2)  # from the cache

        await ip.tokens.revoke(doomed.record.id)
        rejected = await _listen(ip, ip.names.rejected_subject("send_mail"))
        await ip.publish(subject, {"input": mail(subject="k3")}, kept.secret)
        seq = await ip.publish(subject, {"input": mail(subject="d2")}, doomed.secret, msg_id="d2")
        assert await ip.consumer.run_once() == 2
        got = await asyncio.wait_for(rejected.get(), 5)
        assert (got["error"]["code"], got["streamSeq"], got["msgId"]) == (
            "X_UNAUTHORIZED",
            seq,
            "d2",
        )
        assert "revoked" in got["error"]["message"]
        assert (ip.consumer.acked, ip.consumer.refused) == (4, 1)
        assert sorted(r["idempotency_key"] for r in await _rows(pg_pool)) == [
            f"mail:a@example.com:{s}" for s in ("d1", "k1", "k2", "k3")
        ]
        assert ip.edge.known.get(doomed.secret) is None  # forgotten: the next read says why
        assert ip.edge.known.get(kept.secret) is not None
        assert await _stream_messages(ip) == 0


async def test_a_database_failure_is_redelivered_not_refused(
    pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    broken = await away_pool()  # every statement on it fails: the api's database is away
    async with in_process(pg_pool, nats_url, pool_for_edge=broken) as ip:
        token = (await ip.tokens.create(tenant=None, scopes=["enqueue:*"])).secret
        rejected = await _listen(ip, ip.names.rejected_subject("send_mail"))
        await ip.publish(ip.names.js_enqueue_subject("send_mail"), {"input": mail()}, token)
        assert await ip.consumer.run_once() == 1
        assert (ip.consumer.retried, ip.consumer.refused, ip.consumer.acked) == (1, 0, 0)
        assert rejected.empty()
        assert await _stream_messages(ip) == 1  # still there, for the next delivery
    await broken.close()


async def test_events_through_the_stream(pg_pool: asyncpg.Pool[Any], nats_url: str) -> None:
    async with in_process(pg_pool, nats_url) as ip:
        token = (await ip.tokens.create(tenant=ORG_A, scopes=["events:publish"])).secret
        await ip.publish(ip.names.js_event_subject("invoice.paid"), {"payload": {"n": 2}}, token)
        rejected = await _listen(ip, ip.names.rejected_subject("events.late"))
        await ip.publish(ip.names.js_event_subject("late"), {"payload": 1, "x": 1}, token)
        assert await ip.consumer.run_once() == 2
        row = await pg_pool.fetchrow("select name, payload from x_job_events")
        assert row is not None
        assert (row["name"], orjson.loads(row["payload"])) == ("invoice.paid", {"n": 2})
        assert (await asyncio.wait_for(rejected.get(), 5))["error"]["code"] == "X_INPUT_INVALID"


async def test_the_api_creates_the_streams_and_consumes(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> None:
    async for edge in start_nats_api(aiohttp_client, pg_dsn, pg_pool, nats_url):
        js = edge.nc.jetstream()
        enqueue = await js.stream_info(edge.names.enqueue_stream)
        assert sorted(enqueue.config.subjects or []) == sorted(
            [edge.names.js_enqueue_wildcard, edge.names.js_events_wildcard]
        )
        settled = await js.stream_info(edge.names.settled_stream)
        assert settled.config.subjects == [edge.names.settled_wildcard]
        token = await edge.token("enqueue:send_mail", tenant=ORG_A)
        await js.publish(
            edge.names.js_enqueue_subject("send_mail"),
            orjson.dumps({"input": mail()}),
            headers={"Authorization": f"Bearer {token}"},
        )
        for _ in range(200):
            if await edge.jobs():
                break
            await asyncio.sleep(0.05)
        [row] = await edge.jobs()
        assert row["tenant_id"] == ORG_A
