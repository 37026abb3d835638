"""An endpoint's own headers: refused at registration when HTTP forbids them, sealed at rest
like the secret (rows from before migration 0019 stay deliverable in clear until sealed), and a
stored one HTTP forbids fails its delivery as a counted failure instead of invisibly."""

from __future__ import annotations

import base64
import logging
import os
from typing import Any

import asyncpg
import pytest

from tests.support.webhook_receiver import Receiver
from tests.webhooks.kit import LOCAL, make_kit
from ujobs.webhooks.endpoint_headers import check_headers
from ujobs.webhooks.errors import WebhookEndpointInvalidError
from ujobs.webhooks.secrets import SecretBox
from ujobs.webhooks.store_pg import PgWebhookStore

URL = "https://partner.example/hook"
VALUE = "k-7f3a9c-credential"


def new_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def store(pool: asyncpg.Pool[Any], keys: str) -> PgWebhookStore:
    return PgWebhookStore(pool, SecretBox.parse(keys), policy=LOCAL)


async def row_text(pool: asyncpg.Pool[Any]) -> str:
    return str(await pool.fetchval("select string_agg(e::text, ' ') from x_webhook_endpoints e"))


async def test_header_values_are_sealed_at_rest_and_opened_to_deliver(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    found = store(pg_pool, new_key())
    await found.add_endpoint(URL, headers={"X-Api-Key": VALUE}, endpoint_id="ep_1")
    assert VALUE not in await row_text(pg_pool)
    opened = await found.endpoint("ep_1")
    assert opened is not None
    assert dict(opened[0].headers) == {"X-Api-Key": VALUE}
    assert VALUE not in repr(opened[0])
    [info] = await found.endpoints()
    assert info.to_dict()["headers"] == ["X-Api-Key"]
    assert VALUE not in repr(info)


async def test_a_row_from_before_0019_delivers_in_clear_until_sealed_then_reseals(
    pg_pool: asyncpg.Pool[Any],
) -> None:
    old, new = new_key(), new_key()
    before = store(pg_pool, f"old:{old}")
    await before.add_endpoint(URL, endpoint_id="ep_1")
    await before.add_endpoint(URL, endpoint_id="ep_2")
    # What migration 0019 leaves behind: the values in clear, nothing sealed.
    await pg_pool.execute(
        "update x_webhook_endpoints set headers = $1::text::jsonb where id = 'ep_1'",
        f'{{"X-Api-Key": "{VALUE}"}}',
    )
    assert VALUE in await row_text(pg_pool)
    clear = await before.endpoint("ep_1")
    assert clear is not None
    assert dict(clear[0].headers) == {"X-Api-Key": VALUE}
    assert await before.seal_clear_headers() == 1
    assert await before.seal_clear_headers() == 0
    assert VALUE not in await row_text(pg_pool)
    sealed = await before.endpoint("ep_1")
    assert sealed is not None
    assert dict(sealed[0].headers) == {"X-Api-Key": VALUE}
    # A key rotation moves the header values with the secrets; the old key can then go.
    during = store(pg_pool, f"new:{new},old:{old}")
    assert await during.reseal() == 2
    assert await during.reseal() == 0
    after = await store(pg_pool, f"new:{new}").endpoint("ep_1")
    assert after is not None
    assert dict(after[0].headers) == {"X-Api-Key": VALUE}


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"X Api Key": VALUE}, "name"),
        ({"X-Api-Key:": VALUE}, "name"),
        ({"": VALUE}, "name"),
        ({"X-Api-Key\r\nX-Injected": VALUE}, "name"),
        ({"X-Api-Key": VALUE + "\r\nX-Injected: 1"}, "value"),
        ({"X-Api-Key": VALUE + "\n"}, "value"),
        ({"X-Api-Key": VALUE + "\x00"}, "value"),
        ({"X-Api-Key": VALUE + "\x7f"}, "value"),
        ({"X-Api-Key": "x" * 8_193}, "value"),
    ],
)
async def test_registration_refuses_headers_http_forbids_without_echoing_the_value(
    pg_pool: asyncpg.Pool[Any], headers: dict[str, str], reason: str
) -> None:
    with pytest.raises(WebhookEndpointInvalidError) as refused:
        await store(pg_pool, new_key()).add_endpoint(URL, headers=headers)
    assert refused.value.meta["reason"] == reason
    assert VALUE not in str(refused.value.to_dict())
    assert await pg_pool.fetchval("select count(*) from x_webhook_endpoints") == 0


def test_a_tab_and_the_token_punctuation_are_allowed() -> None:
    ok = {"X-Api_Key.v2~!#$%&'*+^`|": "Bearer a\tb é"}
    assert check_headers(ok) == ok


async def test_a_stored_header_http_forbids_is_a_counted_failure_toward_disabling(
    receiver: Receiver, caplog: pytest.LogCaptureFixture
) -> None:
    kit = make_kit(disable_after=1)
    try:
        kit.add_endpoint(receiver.url(), headers={"X-Api-Key": VALUE + "\r\nX-Injected: 1"})
        kit.add_event()
        await kit.enqueue()
        with caplog.at_level(logging.DEBUG):
            execution = await kit.attempt()
    finally:
        await kit.client.close()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_ENDPOINT_INVALID")
    assert [(a.outcome, a.code) for a in kit.ledger.attempts] == [
        ("failed", "X_WEBHOOK_ENDPOINT_INVALID")
    ]
    assert await kit.ledger.is_disabled("ep_1")
    assert receiver.requests == []
    assert VALUE not in caplog.text
    assert VALUE not in repr(list(kit.ledger.attempts))
