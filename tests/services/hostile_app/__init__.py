"""An app whose job takes any JSON under ``data``, its tenant and its key from the input as
sent: what a caller needs to reach ``ujobs.limits`` (depth, lengths) through every edge.

``api`` is what ``UJOBS_APP=tests.services.hostile_app:api`` loads.
"""

from __future__ import annotations

from tests.services.hostile_app import open_input
from ujobs import define_api

api = define_api(jobs=[open_input])
