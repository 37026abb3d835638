"""A small app, as a user writes one, for the registry and ``ujobs manifest`` tests.

``api`` is what ``ujobs manifest --app tests.unit.sample_app:api`` loads.
"""

from __future__ import annotations

from tests.unit.sample_app import billing, mail, schedules
from ujobs import define_api

api = define_api(jobs=[mail, billing], tasks=[schedules])
