"""``ujobs tokens create | list | revoke``: the api's bearer tokens (``ujobs.services.api.tokens``).

``create`` prints the secret ONCE (only its hash is stored); ``revoke`` takes effect on the
next request every api process serves.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ujobs.durations import duration_ms
from ujobs.errors import InvariantError
from ujobs.services.api.tokens import TokenStore, check_tenant, parse_scopes
from ujobs.services.cli.common import DatabaseUrlOption, JsonOption, operate
from ujobs.services.cli.remote import Remote, remote_get
from ujobs.services.config.parse import invalid
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import Progress, emit_json, iso, note, print_table, reported

tokens_app = typer.Typer(help="The api's bearer tokens.", no_args_is_help=True)


def _store(backend: Backend) -> TokenStore:
    return TokenStore(backend.require_pool("ujobs tokens"), clock=backend.driver.clock)


def _expires(raw: str | None) -> int | None:
    if raw is None:
        return None
    try:
        ms = duration_ms(raw.strip(), field="--expires")
    except InvariantError as exc:
        raise invalid("--expires", exc.message) from None
    if ms <= 0:
        raise invalid("--expires", "a token must live longer than 0; e.g. 30d")
    return ms


@tokens_app.command("create")
def tokens_create(
    scopes: Annotated[
        str,
        typer.Option(
            "--scopes",
            help="comma-separated: enqueue:<job>, enqueue:*, events:publish, read, operate, admin",
        ),
    ],
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="the tenant (org id) the token acts for")
    ] = None,
    operator: Annotated[
        bool, typer.Option("--operator", help="a token of no tenant: sees every tenant's jobs")
    ] = False,
    name: Annotated[str | None, typer.Option("--name", help="a label for people")] = None,
    expires: Annotated[
        str | None, typer.Option("--expires", help="lifetime, e.g. 30d or 12h [default: never]")
    ] = None,
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Mint a token and print it ONCE: only its hash is stored."""
    with reported(as_json=as_json):
        if operator == (tenant is not None):
            raise invalid("--tenant", "pass --tenant ORG or --operator, one of the two")
        chosen = parse_scopes(scopes)
        if tenant is not None:
            check_tenant(tenant)
        lifetime = _expires(expires)

    async def work(backend: Backend, _: Progress) -> dict[str, Any]:
        issued = await _store(backend).create(
            tenant=tenant, scopes=chosen, name=name, expires_in_ms=lifetime
        )
        return {**issued.to_json(), "expiresAtMs": issued.record.expires_at_ms}

    doc = operate(work, as_json=as_json, label="creating a token", database_url=database_url)
    expires_at = doc.pop("expiresAtMs")
    if as_json:
        emit_json(doc)
        return
    typer.echo(doc["token"])
    owner = f"tenant {doc['tenant']}" if doc["tenant"] is not None else "operator"
    note(
        f"{doc['id']} ({owner}; {', '.join(doc['scopes'])}; "
        f"expires {iso(expires_at) or 'never'}): the token above is shown only this once"
    )


@tokens_app.command("list")
def tokens_list(database_url: DatabaseUrlOption = None, as_json: JsonOption = False) -> None:
    """Every token, newest first: id, name, tenant, scopes, expiry, revocation (never a
    secret). Without DATABASE_URL it asks the api at UJOBS_URL (an operator admin token)."""

    async def work(backend: Backend, _: Progress) -> list[dict[str, Any]]:
        return [r.to_json() for r in await _store(backend).list()]

    def remote(target: Remote) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = remote_get(target, "/v1/tokens")["tokens"]
        return rows

    rows = operate(
        work, as_json=as_json, label="listing tokens", database_url=database_url, remote=remote
    )
    if as_json:
        emit_json({"tokens": rows})
        return
    print_table(
        ("ID", "NAME", "TENANT", "SCOPES", "CREATED", "EXPIRES", "REVOKED"),
        [
            (
                r["id"],
                r["name"],
                r["tenant"] if r["tenant"] is not None else "(operator)",
                ",".join(r["scopes"]),
                iso(r["createdAtMs"]),
                iso(r["expiresAtMs"]),
                iso(r["revokedAtMs"]),
            )
            for r in rows
        ],
    )
    if not rows:
        note("no tokens yet: ujobs tokens create --tenant ORG --scopes enqueue:*")


@tokens_app.command("revoke")
def tokens_revoke(
    token_id: Annotated[str, typer.Argument(help="the token's id (tok_…)")],
    database_url: DatabaseUrlOption = None,
    as_json: JsonOption = False,
) -> None:
    """Revoke a token: the next request that shows it is refused (401)."""

    async def work(backend: Backend, _: Progress) -> None:
        await _store(backend).revoke(token_id)

    operate(work, as_json=as_json, label=f"revoking {token_id}", database_url=database_url)
    if as_json:
        emit_json({"id": token_id, "revoked": True})
        return
    typer.echo(f"{token_id}: revoked")


__all__ = ["tokens_app"]
