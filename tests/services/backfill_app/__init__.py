"""An app with backfills, for ``ujobs db backfill --app tests.services.backfill_app:api``.

``LEFT`` is what the ``count`` of ``rewrite-slugs`` answers (a dry run's "would touch").
"""

from __future__ import annotations

from tests.services.backfill_app import sweeps
from ujobs import define_api

api = define_api(jobs=[sweeps])
