"""What a delivery carries (``ujobs.webhooks.payload``): an endpoint registered now receives the
Standard Webhooks envelope naming its topic, ``payload="raw"`` keeps the published bytes, and
every endpoint registered before migration 0020 keeps the raw bytes its partner parses. A
partner receives a delivery, verifies it and reads its topic in two kit languages."""

from __future__ import annotations

import base64
import importlib.util
import os
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from types import ModuleType
from typing import Any

import asyncpg
import orjson
import pytest

from tests.support.docs import marked_block, page
from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import LOCAL
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions
from ujobs.drivers.postgres import PostgresDriver, postgres_driver
from ujobs.drivers.postgres.sql import migration_files
from ujobs.execution.attempt import execute_job
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.webhooks import builtin
from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.errors import WebhookEndpointInvalidError, WebhookEventInvalidError
from ujobs.webhooks.family import install_client
from ujobs.webhooks.payload import delivery_body, iso_ms
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.store_pg import PgWebhookStore

T0 = 1_700_000_000_123
KIT = Path(__file__).resolve().parents[2] / "webhooks" / "verify"
PUBLISHED = b'{"order": "ord_1", "total": "12.50", "note": "caf\xc3\xa9"}'


def python_kit() -> ModuleType:
    """The partner kit's Python verifier, loaded from its file as a partner copies it."""
    spec = importlib.util.spec_from_file_location(
        "verify_webhook", KIT / "python" / "verify_webhook.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("verify_webhook", module)  # its dataclass resolves its module
    spec.loader.exec_module(module)
    return module


NODE_RECEIVER = """
import { verifyStandard, readEvent } from './verify-webhook.mjs';
const given = JSON.parse(process.argv.at(-1));
const body = Buffer.from(given.body, 'base64');
verifyStandard(given.secret, given.headers, body);
console.log(JSON.stringify(readEvent(given.headers, body, given.payload)));
"""


def node_reads(secret: str, headers: dict[str, str], body: bytes, payload: str) -> Any:
    """Verify and read one delivery with the kit's Node verifier (fails unless it verifies)."""
    given = {
        "secret": secret,
        "headers": {str(name): value for name, value in headers.items()},
        "body": base64.b64encode(body).decode(),
        "payload": payload,
    }
    done = subprocess.run(
        ["node", "--input-type=module", "-e", NODE_RECEIVER, orjson.dumps(given).decode()],
        cwd=KIT / "node",
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return orjson.loads(done.stdout)


class Env:
    def __init__(self, pool: asyncpg.Pool[Any]) -> None:
        self.clock = FrozenClock(T0)
        key = base64.b64encode(os.urandom(32)).decode()
        self.store = PgWebhookStore(pool, SecretBox.parse(key), clock=self.clock, policy=LOCAL)
        self.driver: PostgresDriver = postgres_driver(pool, clock=self.clock)
        self.client = WebhookClient(LOCAL)

    async def deliver_one(self) -> str:
        claimed = await self.driver.claim(
            ClaimOptions(queues=["webhooks"], limit=1, worker_id="w1", visibility_ms=30_000)
        )
        assert len(claimed) == 1, "expected one due delivery"
        handle = builtin.families().job(claimed[0].name)
        assert handle is not None
        execution = await execute_job(claimed[0], driver=self.driver, handle=handle, context=None)
        return execution.outcome


@pytest.fixture
async def env(pg_pool: asyncpg.Pool[Any]) -> AsyncIterator[Env]:
    found = Env(pg_pool)
    set_job_driver(found.driver)
    builtin.install_store(found.store)
    install_client(found.client)
    try:
        yield found
    finally:
        install_client(None)
        builtin.install_store(None)
        reset_job_driver()
        await found.client.close()
        await found.driver.close()


async def test_a_new_endpoint_receives_the_envelope_and_the_partner_reads_its_topic(
    env: Env, receiver: Receiver
) -> None:
    created = await env.store.add_endpoint(
        receiver.url(), topics=["orders.paid"], endpoint_id="ep_1"
    )
    await builtin.publish("orders.paid", PUBLISHED, event_id="evt_1")
    env.clock.advance(60_000)  # delivered a minute later: the timestamp is still the publish's
    assert await env.deliver_one() == "completed"
    got = receiver.requests[0]
    assert got.body == (
        b'{"type":"orders.paid","timestamp":"2023-11-14T22:13:20.123Z","data":' + PUBLISHED + b"}"
    )
    assert receiver.lowered()["content-type"] == "application/json"
    kit = python_kit()
    kit.verify_standard(created.secret, got.headers, got.body)
    event = kit.read_event(got.headers, got.body)
    assert (event.id, event.topic, event.timestamp) == ("evt_1", "orders.paid", iso_ms(T0))
    assert event.data == orjson.loads(PUBLISHED)
    [listed] = await env.store.endpoints()
    assert listed.payload == "envelope"
    # The partners guide's receiver, as pasted beside the kit's file.
    receiver_code: dict[str, Any] = {}
    exec(marked_block(page("guides/webhooks-partners.md"), "partner-receiver"), receiver_code)
    assert receiver_code["receive"](created.secret, got.headers, got.body) == (204, "orders.paid")
    assert receiver_code["receive"](created.secret, got.headers, got.body + b" ")[0] == 401
    if shutil.which("node") is None:
        pytest.skip("node is not installed: the Python kit read it")
    read = node_reads(created.secret, got.headers, got.body, "envelope")
    assert (read["id"], read["topic"], read["data"]) == (
        "evt_1",
        "orders.paid",
        orjson.loads(PUBLISHED),
    )


async def test_payload_raw_delivers_the_published_bytes(env: Env, receiver: Receiver) -> None:
    created = await env.store.add_endpoint(receiver.url(), endpoint_id="ep_raw", payload="raw")
    await builtin.publish("orders.paid", PUBLISHED, event_id="evt_1")
    assert await env.deliver_one() == "completed"
    got = receiver.requests[0]
    assert got.body == PUBLISHED
    kit = python_kit()
    kit.verify_standard(created.secret, got.headers, got.body)
    assert kit.read_event(got.headers, got.body, "raw").topic is None
    if shutil.which("node") is not None:
        assert node_reads(created.secret, got.headers, got.body, "raw")["topic"] is None


async def test_the_ultimate_scheme_names_its_topic_in_a_header_and_is_raw_only(
    env: Env, receiver: Receiver
) -> None:
    await env.store.add_endpoint(receiver.url(), endpoint_id="ep_u", scheme="ultimate")
    with pytest.raises(WebhookEndpointInvalidError) as refused:
        await env.store.add_endpoint(
            receiver.url(), endpoint_id="ep_u2", scheme="ultimate", payload="envelope"
        )
    assert refused.value.meta["field"] == "payload"
    with pytest.raises(WebhookEndpointInvalidError):
        await env.store.add_endpoint(receiver.url(), endpoint_id="ep_x", payload="json")
    [listed] = await env.store.endpoints()
    assert listed.payload == "raw"
    await builtin.publish("orders.paid", PUBLISHED, event_id="evt_1")
    assert await env.deliver_one() == "completed"
    assert receiver.requests[0].body == PUBLISHED


def test_a_text_body_is_carried_as_a_string_and_bytes_that_are_not_text_are_refused() -> None:
    body, content_type = delivery_body(
        "envelope",
        topic="notes.added",
        event_id="evt_1",
        published_at_ms=0,
        body=b"plain words",
        content_type="text/plain",
    )
    assert orjson.loads(body) == {
        "type": "notes.added",
        "timestamp": "1970-01-01T00:00:00.000Z",
        "data": "plain words",
    }
    assert content_type == "application/json"
    raw = delivery_body(
        "raw", topic="t", event_id="e", published_at_ms=0, body=b"\xff", content_type="x/y"
    )
    assert raw == (b"\xff", "x/y")
    with pytest.raises(WebhookEventInvalidError):
        delivery_body(
            "envelope", topic="t", event_id="e", published_at_ms=0, body=b"\xff", content_type="x"
        )


async def test_endpoints_registered_before_0020_keep_the_raw_body(pg_fresh_dsn: str) -> None:
    """The migration fills the rows it finds with 'raw'; only rows registered after it take
    the 'envelope' default."""
    files = migration_files()
    ids = [migration_id for migration_id, _ in files]
    split = ids.index("0020_webhook_payload")
    conn = await asyncpg.connect(pg_fresh_dsn)
    try:
        for _, text in files[:split]:
            await conn.execute(text)
        insert = (
            "insert into x_webhook_endpoints (id, url, secret_sealed, created_at, updated_at)"
            " values ($1, 'https://partner.example/hook', 'v1:k:x', now(), now())"
        )
        await conn.execute(insert, "ep_before")
        for _, text in files[split:]:
            await conn.execute(text)
        await conn.execute(insert, "ep_after")
        rows = await conn.fetch("select id, payload from x_webhook_endpoints order by id")
    finally:
        await conn.close()
    assert [(r["id"], r["payload"]) for r in rows] == [
        ("ep_after", "envelope"),
        ("ep_before", "raw"),
    ]
