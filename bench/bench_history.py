"""The throughput bench's history: a million finished runs in ``x_jobs`` before a drain.

Apart from ``bench/bench_ujobs.py`` because it needs nothing of the peers' harness (which lives
outside the repo), so its test runs on any clone.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg

# The history: one INSERT ... SELECT over generate_series. Row g was created at
# $3 + g * $4 epoch ms (distinct milliseconds, so the UUIDv7-shaped ids — that ms, version 7,
# variant 8, the rest from an md5 of g — are unique and sort left of every id minted later, as
# in a live table), ran once (dead and failed rows: all their attempts) and finished 5 ms later.
# Idempotency keys are unique (`history:<g>`); finished rows are outside the live-key index.
# $1 name  $2 queue  $3 first ms  $4 ms between rows  $5 rows
HISTORY_SQL = """
insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                    attempt, max_attempts, claim, claimed_by, run_at, created_at, updated_at,
                    finished_at, last_error)
select substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.job, 1, 3)
         || '-8' || substr(h.job, 4, 3) || '-' || substr(h.job, 7, 12),
       substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.run, 1, 3)
         || '-9' || substr(h.run, 4, 3) || '-' || substr(h.run, 7, 12),
       $1::text, $2::text, h.state,
       jsonb_build_object('seq', h.g, 'ts', h.ms / 1000.0),
       null, 'history:' || h.g,
       case when h.state = 'done' then 1 else 3 end, 3,
       case when h.state = 'done' then 1 else 3 end, 'history-worker',
       x_ts(h.ms), x_ts(h.ms), x_ts(h.ms + 5), x_ts(h.ms + 5),
       case when h.state = 'done' then null else 'history: the job raised' end
  from (select g, ms, lpad(to_hex(ms), 12, '0') as ms_hex,
               md5('job:' || g) as job, md5('run:' || g) as run,
               case g % 100 when 0 then 'dead' when 1 then 'failed' else 'done' end as state
          from (select g, $3::bigint + g * $4::bigint as ms
                  from generate_series(1, $5::int) as g) s) h
"""
HISTORY_SPAN_MS = 7 * 86_400_000  # the history covers a week ...
HISTORY_GAP_MS = 3_600_000  # ... that ended an hour before the run


async def insert_history(
    conn: asyncpg.Connection[Any], rows: int, *, name: str, queue: str
) -> None:
    """Leave ``rows`` finished runs of job ``name`` in ``x_jobs`` (see ``HISTORY_SQL``), then
    ``VACUUM ANALYZE x_jobs`` (their tuples all visible, the planner's statistics current) and
    ``CHECKPOINT``: in a live system that history was written long ago, so the checkpointer
    flushing its ~600 MB (at a million rows) must not land in the middle of the drain."""
    step = max(HISTORY_SPAN_MS // max(rows, 1), 1)
    first = int(time.time() * 1000) - HISTORY_GAP_MS - step * rows
    await conn.execute(HISTORY_SQL, name, queue, first, step, rows)
    await conn.execute("vacuum analyze x_jobs")
    await conn.execute("checkpoint")
