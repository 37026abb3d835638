"""An app with an export, as a user writes one: what the api, CLI and process tests load
(``UJOBS_APP=tests.exports.export_app:api``)."""

from __future__ import annotations

from tests.exports.export_app import failing, jobs
from ujobs import define_api

api = define_api(jobs=[jobs, failing])
