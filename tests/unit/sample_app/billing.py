"""Inputs as a pydantic model, a dataclass and a TypedDict; an imported handle; name=."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypedDict

from pydantic import BaseModel

from tests.unit.sample_app.mail import send_mail as mailer  # imported: keeps its own name
from ujobs import Run, job

__all__ = ["charge", "invoice", "mailer", "refund"]


class ChargeInput(BaseModel):
    org_id: str
    cents: int


@dataclass
class RefundInput:
    org_id: str
    cents: int
    reason: str = "requested"


class InvoiceInput(TypedDict):
    org_id: str
    lines: list[str]


async def _charge(run: Run[Any]) -> None:
    """Charge a card."""


charge = job(
    name="billing.charge",
    run=_charge,
    input=ChargeInput,
    idempotency_key=lambda i: f"charge:{i.org_id}:{i.cents}",
    tenant=lambda i: i.org_id,
    concurrency={"key": lambda i: i.org_id, "limit": 1, "when_busy": "fail"},
)


@job(input=RefundInput, idempotency_key=lambda i: f"refund:{i.org_id}", tenant=lambda i: i.org_id)
async def refund(run: Run[Any]) -> None:
    """Refund a charge."""


@job(input=InvoiceInput, idempotency_key=lambda i: f"inv:{i['org_id']}", tenant="none")
async def invoice(run: Run[Any]) -> None:
    """Render an invoice."""
