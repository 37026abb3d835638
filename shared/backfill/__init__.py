"""Backfills: data migrations as jobs — ``backfill()`` over ``job()``, keyset pages as steps, a
throttle, and the ``x_backfills`` ledger beside what was declared.

The map:

- ``declare``: ``backfill()``: a data migration declared as a job — one pass over every row a
  source matches.
- ``source``: What a backfill reads and how fast: a keyset ``BatchSource`` and the
  ``Throttle``.
- ``pass_run``: One backfill PASS: the body of the job ``backfill()`` declares.
- ``ledger_view``: The two halves of the ledger side by side: what was DECLARED
  (``registered_backfills()``) and what has RUN (``driver.backfills``), and the one projection
  every surface reads.
- ``settings``: What a process tells its backfills about itself: the deployment's environment
  name and the app version.

The ledger stores themselves are the drivers' (``ujobs.drivers.{memory,postgres}.backfills``).
"""

from __future__ import annotations

from ujobs.backfill.declare import BackfillDefinition, backfill, definition_checksum
from ujobs.backfill.ledger_view import (
    applied_migrations,
    backfill_named,
    gate_backfill,
    inspect_backfills,
    is_backfill,
    pending_backfills,
    registered_backfills,
)
from ujobs.backfill.settings import configure_backfills
from ujobs.backfill.source import (
    DEFAULT_BACKFILL_BATCH,
    DEFAULT_BACKFILL_RATE,
    BatchSource,
    KeysetSource,
    Throttle,
    keyset,
)

__all__ = [
    "DEFAULT_BACKFILL_BATCH",
    "DEFAULT_BACKFILL_RATE",
    "BackfillDefinition",
    "BatchSource",
    "KeysetSource",
    "Throttle",
    "applied_migrations",
    "backfill",
    "backfill_named",
    "configure_backfills",
    "definition_checksum",
    "gate_backfill",
    "inspect_backfills",
    "is_backfill",
    "keyset",
    "pending_backfills",
    "registered_backfills",
]
