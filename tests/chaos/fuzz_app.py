"""The app the edge fuzzers load (``UJOBS_APP=tests.chaos.fuzz_app:api``): the sample app's jobs,
the exports test app's export, and ``fuzz.open``, a job whose input takes ANY JSON under
``data`` and whose idempotency key is the caller's ``key`` — what lets a fuzzer reach the
depths, sizes and lengths a strict schema refuses early (a nesting the parser takes and the
serializer does not, a 3,000-character tenant or key)."""

from __future__ import annotations

import sys
from typing import Any

from tests.exports.export_app import jobs as export_jobs
from tests.unit.sample_app import billing, mail
from ujobs import Run, define_api, job, t


@job(
    name="fuzz.open",
    input=t.object(org_id=t.string, key=t.string, data=t.any),
    idempotency_key=lambda i: i.key,
    tenant=lambda i: i.org_id,
)
async def open_input(run: Run[Any]) -> None:
    """Nothing: the fuzzers test the edges, and no worker runs in their tests."""


api = define_api(jobs=[mail, billing, export_jobs, sys.modules[__name__]])
