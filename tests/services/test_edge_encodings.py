"""Bytes a client library would never send, sent raw to a live api: credentials that are not
UTF-8 are 401 ``X_UNAUTHORIZED`` on HTTP and NATS (never a 500 or ``X_INTERNAL``), a dashboard
cookie of garbage is a dead login, and a number past 64 bits in a query is a 400."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any
from urllib.parse import urlsplit

import asyncpg
import orjson
import pytest

from tests.services.api_support import ORG_A, mail
from tests.services.nats_support import NatsApi, start_nats_api

NOT_UTF8 = b"\xff\xfe"


@pytest.fixture
async def edge(
    aiohttp_client: Any, pg_dsn: str, pg_pool: asyncpg.Pool[Any], nats_url: str
) -> AsyncIterator[NatsApi]:
    async for started in start_nats_api(aiohttp_client, pg_dsn, pg_pool, nats_url):
        yield started


async def raw_http(edge: NatsApi, request_line: bytes, headers: bytes, body: bytes = b"") -> bytes:
    """One request written byte for byte (aiohttp's client refuses such headers)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", edge.api.client.port)
    writer.write(
        request_line
        + b"\r\nHost: api\r\n"
        + headers
        + b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        + body
    )
    await writer.drain()
    answer = await reader.read()
    writer.close()
    return answer


def status_and_json(answer: bytes) -> tuple[int, Any]:
    head, _, body = answer.partition(b"\r\n\r\n")
    return int(head.split(b" ", 2)[1]), orjson.loads(body)


@pytest.mark.parametrize(
    ("request_line", "body"),
    [
        (b"GET /v1/jobs HTTP/1.1", b""),
        (b"POST /v1/jobs/send_mail HTTP/1.1", orjson.dumps({"input": mail()})),
        (b"POST /v1/events/approved HTTP/1.1", b'{"payload": 1}'),
    ],
    ids=["read", "enqueue", "event"],
)
async def test_a_bearer_that_is_not_utf8_is_401_over_http(
    edge: NatsApi, request_line: bytes, body: bytes
) -> None:
    headers = b"Authorization: Bearer " + NOT_UTF8 + b"\r\nContent-Type: application/json\r\n"
    status, answer = status_and_json(await raw_http(edge, request_line, headers, body))
    assert (status, answer["error"]["code"]) == (401, "X_UNAUTHORIZED")
    assert await edge.jobs() == []


async def test_a_dashboard_cookie_of_garbage_is_a_dead_login(edge: NatsApi) -> None:
    for cookie in (NOT_UTF8, b"ujobs_" + NOT_UTF8 + b"%00", b"x" * 4000):
        answer = await raw_http(edge, b"GET /_x/ HTTP/1.1", b"Cookie: ujobs_x=" + cookie + b"\r\n")
        head = answer.partition(b"\r\n\r\n")[0].decode("latin-1")
        assert head.startswith("HTTP/1.1 303"), head
        location = next(v for k, _, v in (line.partition(": ") for line in head.split("\r\n"))
                        if k.lower() == "location")  # fmt: skip
        assert urlsplit(location).path == "/_x/login"
    form = b"csrf=%ff%fe"
    answer = await raw_http(
        edge,
        b"POST /_x/logout HTTP/1.1",
        b"Cookie: ujobs_x=" + NOT_UTF8 + b"\r\nContent-Type: application/x-www-form-urlencoded\r\n",
        form,
    )
    assert answer.startswith(b"HTTP/1.1 403"), answer[:80]  # a stale form, not a crash


async def nats_raw_request(nats_url: str, subject: str, headers: bytes, payload: bytes) -> Any:
    """A request/reply with a header block written byte for byte (nats-py encodes its
    headers as UTF-8, so it cannot send these), answered on an inbox of its own."""
    address = urlsplit(nats_url)
    reader, writer = await asyncio.open_connection(address.hostname, address.port)
    await reader.readline()  # INFO
    connect = {"verbose": False, "pedantic": False, "headers": True, "protocol": 1}
    block = b"NATS/1.0\r\n" + headers + b"\r\n"
    writer.write(
        b"CONNECT " + orjson.dumps(connect) + b"\r\n"
        b"SUB _INBOX.raw 1\r\n"
        b"HPUB %s _INBOX.raw %d %d\r\n"
        % (subject.encode(), len(block), len(block) + len(payload))
        + block
        + payload
        + b"\r\nPING\r\n"
    )
    await writer.drain()
    try:
        while True:
            line = await asyncio.wait_for(reader.readline(), 10)
            if line.startswith(b"PING"):
                writer.write(b"PONG\r\n")
            elif line.startswith(b"MSG"):
                size = int(line.split()[-1])
                return orjson.loads((await reader.readexactly(size + 2))[:-2])
            elif line.startswith(b"HMSG"):
                header_size, size = (int(n) for n in line.split()[-2:])
                return orjson.loads((await reader.readexactly(size + 2))[header_size:-2])
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError):
            await writer.wait_closed()


async def test_a_bearer_that_is_not_utf8_is_401_over_nats(edge: NatsApi, nats_url: str) -> None:
    header = b"Authorization: Bearer " + NOT_UTF8 + b"\r\n"
    payload = orjson.dumps({"input": mail(ORG_A)})
    reply = await nats_raw_request(
        nats_url, edge.names.enqueue_subject("send_mail"), header, payload
    )
    assert reply["error"]["code"] == "X_UNAUTHORIZED"
    reply = await nats_raw_request(
        nats_url, edge.names.event_subject("approved"), header, b'{"payload": 1}'
    )
    assert reply["error"]["code"] == "X_UNAUTHORIZED"
    assert await edge.jobs() == []


async def test_a_page_size_past_64_bits_is_400(edge: NatsApi) -> None:
    token = await edge.token("read")
    status, body = await edge.api.call("GET", "/v1/jobs?limit=" + "9" * 23, token)
    assert (status, body["error"]["code"]) == (400, "X_JOB_PAGE_INVALID")
