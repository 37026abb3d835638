"""The app of the poison-message tests: ``fragile``'s idempotency key raises an error that is
not ours (a bug in the job's own code, as a job author writes one) for the note ``poison``,
so every enqueue of such an input fails unexpectedly (``X_INTERNAL``), on every edge and on
every delivery, while any other note enqueues as usual."""

from __future__ import annotations

import sys
from typing import Any

from ujobs import Run, define_api, job, t

POISON = "poison"


def _key(i: Any) -> str:
    if i.note == POISON:
        raise ZeroDivisionError(f"a key of /srv/app/secret.py for {i.org_id}")
    return f"fragile:{i.org_id}:{i.note}"


@job(
    input=t.object(org_id=t.uuid, note=t.string),
    idempotency_key=_key,
    tenant=lambda i: i.org_id,
)
async def fragile(run: Run[Any]) -> None:
    """Nothing: the tests are about its enqueue."""


api = define_api(jobs=[sys.modules[__name__]], install=False)
