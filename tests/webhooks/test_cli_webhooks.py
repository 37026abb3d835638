"""``ujobs webhooks …``: endpoints add | list | disable | enable | rotate-secret, publish,
deliveries, redeliver, reseal, new-key — each answering JSON, or its X_ code."""

from __future__ import annotations

import asyncio
import base64
import os

import asyncpg
import pytest

from tests.support.cli import json_of, ujobs
from ujobs.errors import ConfigInvalidError
from ujobs.services.webhook_deliverer import deliverer_registry, webhook_settings

KEY = base64.b64encode(os.urandom(32)).decode()
ENV = {"UJOBS_SECRET_KEY": KEY, "UJOBS_WEBHOOK_ALLOW_PRIVATE": "", "UJOBS_WEBHOOK_ALLOW_HTTP": ""}


def run(dsn: str, *args: str, env: dict[str, str] | None = None) -> object:
    return json_of(ujobs("webhooks", *args, "--json", dsn=dsn, env={**ENV, **(env or {})}))


def test_new_key_prints_a_usable_key() -> None:
    result = ujobs("webhooks", "new-key")
    assert result.exit_code == 0
    assert len(base64.b64decode(result.stdout.strip())) == 32


def test_the_endpoint_lifecycle(pg_dsn: str) -> None:
    added = run(
        pg_dsn,
        "endpoints",
        "add",
        "https://partner.example/hook",
        "--topic",
        "orders.paid",
        "--tenant",
        "org_a",
        "--header",
        "Authorization=Bearer t",
        "--id",
        "ep_1",
    )
    assert isinstance(added, dict)
    assert added["id"] == "ep_1"
    assert str(added["secret"]).startswith("whsec_")
    listed = run(pg_dsn, "endpoints", "list")
    assert isinstance(listed, dict)
    [row] = listed["endpoints"]
    assert (row["id"], row["topics"], row["disabledAtMs"]) == ("ep_1", ["orders.paid"], None)
    assert added["secret"] not in str(listed)
    run(pg_dsn, "endpoints", "disable", "ep_1")
    listed = run(pg_dsn, "endpoints", "list")
    assert isinstance(listed, dict)
    assert listed["endpoints"][0]["disabledReason"] == "operator"
    run(pg_dsn, "endpoints", "enable", "ep_1")
    rotated = run(pg_dsn, "endpoints", "rotate-secret", "ep_1")
    assert isinstance(rotated, dict)
    assert rotated["secret"] != added["secret"]
    assert run(pg_dsn, "reseal") == {"resealed": 0}
    run(pg_dsn, "endpoints", "subscribe", "ep_1", "--topic", "orders.refunded", "--topic", "*")
    removed = run(pg_dsn, "endpoints", "unsubscribe", "ep_1", "--topic", "orders.paid")
    assert removed == {"id": "ep_1", "unsubscribed": ["orders.paid"]}
    listed = run(pg_dsn, "endpoints", "list")
    assert isinstance(listed, dict)
    assert listed["endpoints"][0]["topics"] == ["*", "orders.refunded"]
    missing = run(pg_dsn, "endpoints", "subscribe", "ep_missing", "--topic", "a")
    assert isinstance(missing, dict)
    assert missing["error"]["code"] == "X_WEBHOOK_ENDPOINT_UNKNOWN"
    table = ujobs("webhooks", "endpoints", "list", dsn=pg_dsn, env=ENV)
    assert table.stdout.split()[:8] == [
        "ID",
        "TENANT",
        "URL",
        "SCHEME",
        "PAYLOAD",
        "TOPICS",
        "DISABLED",
        "FAILURES",
    ]


def test_payload_is_an_endpoint_option_envelope_by_default(pg_dsn: str) -> None:
    run(pg_dsn, "endpoints", "add", "https://partner.example/a", "--id", "ep_env")
    run(
        pg_dsn,
        "endpoints",
        "add",
        "https://partner.example/b",
        "--id",
        "ep_raw",
        "--payload",
        "raw",
    )
    listed = run(pg_dsn, "endpoints", "list")
    assert isinstance(listed, dict)
    assert {e["id"]: e["payload"] for e in listed["endpoints"]} == {
        "ep_env": "envelope",
        "ep_raw": "raw",
    }
    refused = run(pg_dsn, "endpoints", "add", "https://partner.example/c", "--payload", "json")
    assert isinstance(refused, dict)
    assert refused["error"]["code"] == "X_WEBHOOK_ENDPOINT_INVALID"


def test_publish_then_deliveries_and_redeliver(pg_dsn: str) -> None:
    run(pg_dsn, "endpoints", "add", "https://partner.example/hook", "--id", "ep_1")
    published = run(pg_dsn, "publish", "orders.paid", "--body", '{"n":1}', "--event-id", "evt_1")
    assert isinstance(published, dict)
    assert published["eventId"] == "evt_1"
    assert len(published["deliveries"]) == 1
    assert run(pg_dsn, "deliveries", "--endpoint", "ep_1") == {"deliveries": []}
    again = run(pg_dsn, "redeliver", "--endpoint", "ep_1", "--event", "evt_1")
    assert isinstance(again, dict)
    assert [d["deduped"] for d in again["deliveries"]] == [True]  # still queued: one delivery
    none = run(pg_dsn, "redeliver", "--endpoint", "ep_1", "--since", "2026-01-01T00:00:00Z")
    assert none == {"deliveries": []}


def test_deliveries_lists_the_ledger_newest_first(pg_dsn: str) -> None:
    run(pg_dsn, "endpoints", "add", "https://partner.example/hook", "--id", "ep_1")

    async def insert() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(
                "insert into x_webhook_deliveries (endpoint_id, event_id, job_id, attempt,"
                " outcome, status, code, latency_ms, response_excerpt, at) values"
                " ('ep_1','evt_1','j1',1,'failed',500,'X_WEBHOOK_DELIVERY_FAILED',5,'no',"
                "  to_timestamp(1)),"
                " ('ep_1','evt_1','j1',2,'delivered',200,null,4,'ok',to_timestamp(2))"
            )
        finally:
            await conn.close()

    asyncio.run(insert())
    every = run(pg_dsn, "deliveries", "--endpoint", "ep_1")
    assert isinstance(every, dict)
    assert [d["attempt"] for d in every["deliveries"]] == [2, 1]
    failed = run(pg_dsn, "deliveries", "--endpoint", "ep_1", "--failed")
    assert isinstance(failed, dict)
    assert [(d["status"], d["response"]) for d in failed["deliveries"]] == [(500, "no")]


def test_failures_answer_their_codes(pg_dsn: str) -> None:
    no_key = ujobs("webhooks", "endpoints", "list", "--json", dsn=pg_dsn)
    assert no_key.exit_code == 1
    assert json_of(no_key)["error"]["code"] == "X_CONFIG_INVALID"
    private = run(pg_dsn, "endpoints", "add", "https://127.0.0.1/hook")
    assert isinstance(private, dict)
    assert private["error"]["code"] == "X_WEBHOOK_ENDPOINT_INVALID"
    http = run(pg_dsn, "endpoints", "add", "http://partner.example/hook")
    assert isinstance(http, dict)
    assert http["error"]["code"] == "X_WEBHOOK_ENDPOINT_INVALID"
    allowed = run(
        pg_dsn, "endpoints", "add", "http://partner.example/hook",
        env={"UJOBS_WEBHOOK_ALLOW_HTTP": "1"},
    )  # fmt: skip
    assert isinstance(allowed, dict)
    assert "id" in allowed
    header = run(pg_dsn, "endpoints", "add", "https://partner.example/h", "--header", "nope")
    assert isinstance(header, dict)
    assert header["error"]["code"] == "X_INPUT_INVALID"
    hex_loopback = run(pg_dsn, "endpoints", "add", "https://0x7f.1/hook")
    assert isinstance(hex_loopback, dict)
    assert hex_loopback["error"]["code"] == "X_WEBHOOK_ENDPOINT_INVALID"
    assert hex_loopback["error"]["meta"]["reason"] == "loopback"
    for bad in ("X-Api-Key=sekrit-9\r\nX-Injected: 1", "X Api Key=sekrit-9"):
        forbidden = run(pg_dsn, "endpoints", "add", "https://partner.example/h", "--header", bad)
        assert isinstance(forbidden, dict)
        assert forbidden["error"]["code"] == "X_WEBHOOK_ENDPOINT_INVALID"
        assert "sekrit-9" not in str(forbidden)
    unknown = run(pg_dsn, "endpoints", "disable", "ep_missing")
    assert isinstance(unknown, dict)
    assert unknown["error"]["code"] == "X_WEBHOOK_ENDPOINT_UNKNOWN"
    neither = run(pg_dsn, "redeliver", "--endpoint", "ep_missing")
    assert isinstance(neither, dict)
    assert neither["error"]["code"] == "X_INPUT_INVALID"


def test_the_webhook_settings_refuse_bad_values_by_name() -> None:
    settings = webhook_settings(
        {"UJOBS_SECRET_KEY": KEY, "UJOBS_WEBHOOK_ALLOW_PRIVATE": "10.0.0.0/8"}
    )
    assert (settings.policy.allow_http, len(settings.policy.allow_networks)) == (False, 1)
    for variable, value in (
        ("UJOBS_WEBHOOK_ALLOW_HTTP", "yes"),
        ("UJOBS_WEBHOOK_ALLOW_PRIVATE", "x"),
        ("UJOBS_SECRET_KEY", "short"),
    ):
        with pytest.raises(ConfigInvalidError) as exc:
            webhook_settings({"UJOBS_SECRET_KEY": KEY, variable: value})
        assert exc.value.meta["variable"] == variable


def test_the_deliverer_always_registers_the_built_in_families() -> None:
    alone = deliverer_registry(None)
    assert sorted(alone.jobs) == ["ujobs.webhooks", "ujobs.webhooks.global"]
    with_app = deliverer_registry("tests.unit.sample_app:api")
    assert {"ujobs.webhooks", "ujobs.webhooks.global"} < set(with_app.jobs)
    assert len(with_app.jobs) > 2
    assert all(with_app.jobs[n].queue == "webhooks" for n in alone.jobs)


def test_the_per_endpoint_cap_is_the_operators_to_set() -> None:
    assert webhook_settings({"UJOBS_SECRET_KEY": KEY}).endpoint_concurrency == 8
    off = webhook_settings({"UJOBS_SECRET_KEY": KEY, "UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY": "0"})
    assert off.endpoint_concurrency == 0
    uncapped = deliverer_registry(None, 0)
    assert all(handle.concurrency is None for handle in uncapped.jobs.values())
    three = deliverer_registry(None, 3)
    limits = {getattr(h.concurrency, "limit", None) for h in three.jobs.values()}
    assert limits == {3}
    with pytest.raises(ConfigInvalidError) as bad:
        webhook_settings({"UJOBS_SECRET_KEY": KEY, "UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY": "-1"})
    assert bad.value.meta["variable"] == "UJOBS_WEBHOOK_ENDPOINT_CONCURRENCY"
