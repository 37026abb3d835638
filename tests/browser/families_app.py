"""The sample app plus a backfill, an export and its plain job: what the dashboard's family
pages (backfills, webhooks, exports) are tested against
(``UJOBS_APP=tests.browser.families_app:api``)."""

from __future__ import annotations

from tests.exports.export_app import jobs as exports
from tests.services.backfill_app import sweeps
from tests.unit.sample_app import billing, mail, schedules
from ujobs import define_api

api = define_api(jobs=[mail, billing, sweeps, exports], tasks=[schedules])
