"""``ujobs webhooks …``: endpoints, publishing, the delivery ledger, redelivery, the key.

Every command reaches Postgres (the endpoints and the ledger live there, whatever the queue's
driver) and opens secrets with ``UJOBS_SECRET_KEY``; ``publish`` and ``redeliver`` enqueue on the
queue's own driver. An endpoint's secret is printed once, by ``endpoints add`` and
``endpoints rotate-secret``, and never again.
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from ujobs.clock import to_epoch_ms
from ujobs.errors import InputInvalidError
from ujobs.jobs.enqueue_target import reset_job_driver, set_job_driver
from ujobs.services.cli.common import DatabaseUrlOption, DriverOption, JsonOption, refuse_remote
from ujobs.services.config.settings import OperatorConfig, environment
from ujobs.services.runtime.backends import Backend, open_backend
from ujobs.services.runtime.output import Progress, emit_json, iso, note, print_table, reported
from ujobs.services.runtime.secret_key import write_key_file
from ujobs.services.webhook_deliverer import WebhookSettings, webhook_settings
from ujobs.webhooks import builtin
from ujobs.webhooks.store_pg import PgWebhookStore, new_secret_key

T = TypeVar("T")

webhooks_app = typer.Typer(
    help="Outbound webhooks: endpoints, publish, deliveries, redeliver.", no_args_is_help=True
)
endpoints_app = typer.Typer(help="Webhook endpoints and their subscriptions.", no_args_is_help=True)
webhooks_app.add_typer(endpoints_app, name="endpoints")

EndpointArg = Annotated[str, typer.Argument(help="the endpoint's id", show_default=False)]
TenantOption = Annotated[
    str | None, typer.Option("--tenant", help="the org owning it [default: no tenant]")
]

Work = Callable[[PgWebhookStore, Backend], Awaitable[T]]


def _run(
    work: Work[T], *, as_json: bool, label: str, database_url: str | None, driver: str | None
) -> T:
    with reported(as_json=as_json):
        env = environment()
        refuse_remote(env, database_url=database_url, driver=driver)
        config = OperatorConfig.load(env, database_url=database_url, driver=driver)
        settings = webhook_settings(env)
        with Progress(label):
            return asyncio.run(_open(config, settings, work))
    raise AssertionError("unreachable: reported() exits on every error")


async def _open(config: OperatorConfig, settings: WebhookSettings, work: Work[T]) -> T:
    async with open_backend(
        config.common.connections, need_database=True, pool_size=2, generic_plans=False
    ) as backend:
        pool = backend.require_pool("ujobs webhooks")
        store = PgWebhookStore(
            pool, settings.box, clock=backend.driver.clock, policy=settings.policy
        )
        set_job_driver(backend.driver)
        try:
            return await work(store, backend)
        finally:
            reset_job_driver()


def _headers(raw: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for item in raw:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InputInvalidError(
                f"--header takes name=value, got {item!r}", meta={"field": "header"}
            )
        out[name.strip()] = value
    return out


def _since_ms(raw: str) -> int:
    text = raw.strip()
    if text.isdigit():
        return int(text)
    try:
        return to_epoch_ms(datetime.fromisoformat(text.replace("Z", "+00:00")))
    except ValueError:
        raise InputInvalidError(
            f"--since takes epoch milliseconds or an ISO time with its zone, got {raw!r}",
            meta={"field": "since"},
        ) from None


@webhooks_app.command("new-key")
def new_key(
    into: Annotated[
        Path | None,
        typer.Option(
            "--into",
            help="write the key to this file (owner-only) unless one is there, print nothing "
            "secret (for UJOBS_SECRET_KEY_FILE)",
        ),
    ] = None,
    as_json: JsonOption = False,
) -> None:
    """Print a fresh UJOBS_SECRET_KEY value (32 random bytes, base64), or write it to a file."""
    key = new_secret_key()
    if into is not None:
        with reported(as_json=as_json):
            wrote = write_key_file(into, key)
        if as_json:
            emit_json({"path": str(into), "written": wrote})
        else:
            note(f"{into}: {'a new key written' if wrote else 'a key is already there; kept'}")
        return
    if as_json:
        emit_json({"key": key})
    else:
        sys.stdout.write(key + "\n")


@endpoints_app.command("add")
def endpoints_add(
    url: Annotated[str, typer.Argument(help="https://… the partner receives on")],
    topic: Annotated[
        list[str] | None, typer.Option("--topic", help="a topic to deliver (repeat; default *)")
    ] = None,
    tenant: TenantOption = None,
    scheme: Annotated[
        str, typer.Option(help="standard (Standard Webhooks) or ultimate (x-ultimate-webhook-*)")
    ] = "standard",
    payload: Annotated[
        str | None,
        typer.Option(
            help='envelope: {"type": <topic>, "timestamp", "data": <the event>} (Standard '
            "Webhooks); raw: the published bytes [default: envelope; raw on the ultimate scheme]"
        ),
    ] = None,
    header: Annotated[
        list[str] | None, typer.Option("--header", help="name=value sent with every delivery")
    ] = None,
    description: Annotated[str, typer.Option(help="a note for operators")] = "",
    rate: Annotated[
        float | None, typer.Option(help="at most this many POSTs a second [default: no pace]")
    ] = None,
    endpoint_id: Annotated[str | None, typer.Option("--id", help="[default: ep_<new id>]")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Register an endpoint; prints its id and its secret (shown this once)."""

    async def work(store: PgWebhookStore, _: Backend) -> dict[str, str]:
        created = await store.add_endpoint(
            url,
            tenant=tenant,
            topics=topic or ["*"],
            scheme=scheme,
            headers=_headers(header or []),
            description=description,
            endpoint_id=endpoint_id,
            rate_per_s=rate,
            payload=payload,
        )
        return {"id": created.id, "secret": created.secret}

    answer = _run(work, as_json=as_json, label="adding", database_url=database_url, driver=driver)
    if as_json:
        emit_json(answer)
        return
    sys.stdout.write(f"id      {answer['id']}\nsecret  {answer['secret']}\n")
    note("the secret is shown once: hand it to the partner now")


@endpoints_app.command("list")
def endpoints_list(
    tenant: Annotated[str | None, typer.Option("--tenant", help="[default: every tenant]")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Endpoints with their topics, state and consecutive failures (never a secret)."""

    async def work(store: PgWebhookStore, _: Backend) -> list[dict[str, Any]]:
        return [e.to_dict() for e in await store.endpoints(tenant)]

    rows = _run(work, as_json=as_json, label="reading", database_url=database_url, driver=driver)
    if as_json:
        emit_json({"endpoints": rows})
        return
    print_table(
        ("ID", "TENANT", "URL", "SCHEME", "PAYLOAD", "TOPICS", "DISABLED", "FAILURES"),
        [
            (
                r["id"],
                r["tenant"],
                r["url"],
                r["scheme"],
                r["payload"],
                ",".join(r["topics"]),
                r["disabledReason"] if r["disabledAtMs"] is not None else "no",
                r["consecutiveFailures"],
            )
            for r in rows
        ],
    )
    if not rows:
        note("no endpoint yet: ujobs webhooks endpoints add https://…")


def _state_command(
    verb: str, endpoint_id: str, *, as_json: bool, database_url: str | None, driver: str | None
) -> None:
    async def work(store: PgWebhookStore, _: Backend) -> None:
        if verb == "disable":
            await store.disable(endpoint_id)
        else:
            await store.enable(endpoint_id)

    _run(work, as_json=as_json, label=verb, database_url=database_url, driver=driver)
    if as_json:
        emit_json({"id": endpoint_id, verb + "d": True})
    else:
        note(f"{endpoint_id}: {verb}d")


@endpoints_app.command("disable")
def endpoints_disable(
    endpoint_id: EndpointArg,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop deliveries to an endpoint; its events are kept for a redeliver."""
    _state_command(
        "disable", endpoint_id, as_json=as_json, database_url=database_url, driver=driver
    )


@endpoints_app.command("enable")
def endpoints_enable(
    endpoint_id: EndpointArg,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deliver to an endpoint again (then `ujobs webhooks redeliver` what it missed)."""
    _state_command("enable", endpoint_id, as_json=as_json, database_url=database_url, driver=driver)


TopicsOption = Annotated[
    list[str], typer.Option("--topic", help="a topic ('*' for every topic); repeat for more")
]


@endpoints_app.command("subscribe")
def endpoints_subscribe(
    endpoint_id: EndpointArg,
    topic: TopicsOption,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Deliver these topics to an endpoint too."""

    async def work(store: PgWebhookStore, _: Backend) -> None:
        await store.subscribe(endpoint_id, topic)

    _run(work, as_json=as_json, label="subscribing", database_url=database_url, driver=driver)
    if as_json:
        emit_json({"id": endpoint_id, "subscribed": sorted(topic)})
    else:
        note(f"{endpoint_id}: subscribed to {', '.join(sorted(topic))}")


@endpoints_app.command("unsubscribe")
def endpoints_unsubscribe(
    endpoint_id: EndpointArg,
    topic: TopicsOption,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Stop delivering these topics to an endpoint (queued deliveries still go)."""

    async def work(store: PgWebhookStore, _: Backend) -> list[str]:
        return await store.unsubscribe(endpoint_id, topic)

    removed = _run(
        work, as_json=as_json, label="unsubscribing", database_url=database_url, driver=driver
    )
    if as_json:
        emit_json({"id": endpoint_id, "unsubscribed": removed})
    else:
        note(f"{endpoint_id}: unsubscribed from {', '.join(removed) or 'nothing'}")


@endpoints_app.command("rotate-secret")
def endpoints_rotate(
    endpoint_id: EndpointArg,
    grace_hours: Annotated[
        float, typer.Option(help="hours the old secret keeps signing beside the new one")
    ] = 24.0,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """A new secret (printed once); the old one signs beside it for --grace-hours."""

    async def work(store: PgWebhookStore, _: Backend) -> str:
        return await store.rotate_secret(endpoint_id, grace_ms=int(grace_hours * 3_600_000))

    secret = _run(work, as_json=as_json, label="rotating", database_url=database_url, driver=driver)
    if as_json:
        emit_json({"id": endpoint_id, "secret": secret})
    else:
        sys.stdout.write(f"secret  {secret}\n")


@webhooks_app.command("publish")
def publish(
    topic: Annotated[str, typer.Argument(help="the event's topic, e.g. orders.paid")],
    body: Annotated[str, typer.Option(help="the JSON body, or @path to read it from a file")],
    tenant: TenantOption = None,
    event_id: Annotated[str | None, typer.Option("--event-id", help="[default: new]")] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Store an event and queue one delivery per subscribed endpoint of the tenant."""
    data = Path(body[1:]).read_bytes() if body.startswith("@") else body.encode()

    async def work(store: PgWebhookStore, _: Backend) -> dict[str, Any]:
        published = await builtin.publish(
            topic, data, tenant=tenant, event_id=event_id, store=store
        )
        return published.to_dict()

    answer = _run(
        work, as_json=as_json, label="publishing", database_url=database_url, driver=driver
    )
    if as_json:
        emit_json(answer)
    else:
        note(f"{answer['eventId']}: {len(answer['deliveries'])} deliveries queued")


@webhooks_app.command("deliveries")
def deliveries(
    endpoint: Annotated[str, typer.Option("--endpoint", help="the endpoint's id")],
    failed: Annotated[bool, typer.Option("--failed", help="only what did not deliver")] = False,
    limit: Annotated[int, typer.Option(min=1, max=1000)] = 50,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """An endpoint's delivery attempts, newest first."""

    async def work(store: PgWebhookStore, _: Backend) -> list[dict[str, Any]]:
        found = await store.deliveries(endpoint, failed_only=failed, limit=limit)
        return [a.to_dict() for a in found]

    rows = _run(work, as_json=as_json, label="reading", database_url=database_url, driver=driver)
    if as_json:
        emit_json({"deliveries": rows})
        return
    print_table(
        ("AT", "EVENT", "ATTEMPT", "OUTCOME", "STATUS", "CODE", "MS", "RESPONSE"),
        [
            (
                iso(r["atMs"]),
                r["eventId"],
                r["attempt"],
                r["outcome"],
                r["status"],
                r["code"],
                r["latencyMs"],
                r["response"][:60],
            )
            for r in rows
        ],
    )


@webhooks_app.command("redeliver")
def redeliver(
    endpoint: Annotated[str, typer.Option("--endpoint", help="the endpoint's id")],
    event: Annotated[str | None, typer.Option("--event", help="one event's id")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="every event failed since (epoch ms or ISO time) and never delivered"),
    ] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Queue one delivery again, or every failed one of an endpoint since a time."""
    if (event is None) == (since is None):
        with reported(as_json=as_json):
            raise InputInvalidError("give --event or --since (one of them)")
    since_ms = _since_ms(since) if since is not None else None

    async def work(store: PgWebhookStore, _: Backend) -> list[dict[str, Any]]:
        queued = await builtin.redeliver(endpoint, event_id=event, since_ms=since_ms, store=store)
        return [{"id": e.id, "runId": e.run_id, "deduped": e.deduped} for e in queued]

    rows = _run(
        work, as_json=as_json, label="redelivering", database_url=database_url, driver=driver
    )
    if as_json:
        emit_json({"deliveries": rows})
    else:
        note(f"{endpoint}: {len(rows)} deliveries queued")


@webhooks_app.command("reseal")
def reseal(
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Seal every endpoint secret and header value again under UJOBS_SECRET_KEY's first key
    (key rotation; header values stored in clear before migration 0019 are sealed too)."""

    async def work(store: PgWebhookStore, _: Backend) -> int:
        return await store.reseal()

    moved = _run(work, as_json=as_json, label="resealing", database_url=database_url, driver=driver)
    if as_json:
        emit_json({"resealed": moved})
    else:
        note(f"{moved} endpoints resealed")
