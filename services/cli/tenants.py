"""``ujobs tenants weight <tenant> [<n>]``: a tenant's weight in the fair claim.

Without ``<n>`` it prints the weight (1 unless an operator set another); with it, it sets the
weight (1..1000), which every worker's next claim reads: no restart. The weights live beside
the queue (Postgres ``x_tenant_weights``, Redis ``{prefix}:tw``), so ``--driver`` picks the
same backend the workers claim from. The api's ``GET``/``PUT /v1/tenants/{tenant}/weight`` call
the same functions (``ujobs.introspect.tenant_weight``/``set_tenant_weight``).
"""

from __future__ import annotations

from typing import Annotated, Any

import typer

from ujobs.introspect import set_tenant_weight, tenant_weight
from ujobs.services.cli.common import DatabaseUrlOption, DriverOption, JsonOption, operate
from ujobs.services.runtime.backends import Backend
from ujobs.services.runtime.output import Progress, emit_json

tenants_app = typer.Typer(help="Tenants: their weights in the fair claim.", no_args_is_help=True)


@tenants_app.command("weight")
def tenants_weight(
    tenant: Annotated[str, typer.Argument(help="the tenant's id", show_default=False)],
    weight: Annotated[
        int | None,
        typer.Argument(help="the weight to set, 1 to 1000 (omit to read it)", show_default=False),
    ] = None,
    database_url: DatabaseUrlOption = None,
    driver: DriverOption = None,
    as_json: JsonOption = False,
) -> None:
    """Read a tenant's weight, or set it: under contention a tenant of weight 3 is handed three
    jobs for every one of a tenant of weight 1 (default 1)."""

    async def work(b: Backend, _: Progress) -> dict[str, Any]:
        if weight is None:
            return await tenant_weight(b.driver, tenant)
        return await set_tenant_weight(b.driver, tenant, weight)

    label = f"reading {tenant}'s weight" if weight is None else f"weighing {tenant}"
    doc = operate(work, as_json=as_json, label=label, database_url=database_url, driver=driver)
    if as_json:
        emit_json(doc)
        return
    typer.echo(f"{doc['tenantId']}: weight {doc['weight']}")
