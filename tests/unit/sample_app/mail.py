"""Jobs declared with the decorator; one is exported under another name than its function."""

from __future__ import annotations

from typing import Any

from ujobs import Retry, Run, job, t


@job(
    input=t.object(to=t.string, subject=t.string, org_id=t.uuid),
    idempotency_key=lambda i: f"mail:{i.to}:{i.subject}",
    tenant=lambda i: i.org_id,
    retry=Retry(attempts=5, backoff="exponential", delay="1s"),
    output=t.object(messageId=t.string),
)
async def send_mail(run: Run[Any]) -> None:
    """Send one email."""


async def _deliver(run: Run[Any]) -> None:
    """Deliver a notification (exported as ``notify``: the export name is the job's name)."""


notify = job(
    input=t.object(user_id=t.uuid, items=t.array(t.object(id=t.string))),
    idempotency_key=lambda i: f"notify:{i.user_id}",
    tenant="none",
)(_deliver)
