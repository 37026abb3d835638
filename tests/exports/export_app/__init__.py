"""An app with an export, as a user writes one: what the api, CLI and process tests load
(``UJOBS_APP=tests.exports.export_app:api``)."""

from __future__ import annotations

from ujobs import define_api
from tests.exports.export_app import jobs

api = define_api(jobs=[jobs])
