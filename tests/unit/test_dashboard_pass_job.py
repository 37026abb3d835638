"""The backfills page links each ledger row to its pass's job by name, scope and run id: two
orgs' passes under one caller-chosen run id link to their own jobs."""

from __future__ import annotations

from ujobs.services.dashboard.pages_backfills import PassJobs, pass_job

JOBS: PassJobs = {
    ("per-org", "org_a", "chosen"): "job-a",
    ("per-org", "org_b", "chosen"): "job-b",
    ("every-org", "org_c", "run-1"): "job-c",
}


def test_a_scoped_pass_links_to_its_own_tenants_job() -> None:
    assert pass_job(JOBS, {"name": "per-org", "tenant": "org_a", "runId": "chosen"}) == "job-a"
    assert pass_job(JOBS, {"name": "per-org", "tenant": "org_b", "runId": "chosen"}) == "job-b"
    assert pass_job(JOBS, {"name": "per-org", "tenant": "org_d", "runId": "chosen"}) is None


def test_a_pass_over_every_tenant_links_to_its_job_whoever_enqueued_it() -> None:
    # Enqueued with org_c's token: its job carries org_c, its ledger row no tenant.
    assert pass_job(JOBS, {"name": "every-org", "tenant": None, "runId": "run-1"}) == "job-c"
    assert pass_job(JOBS, {"name": "every-org", "tenant": None, "runId": None}) is None
