"""The backlogs of ``bench/backlog_scaling.py``, filled fast and in the shape the enqueue writes.

Postgres rows are one server-side ``INSERT ... SELECT`` over ``generate_series`` each: a
million live rows in seconds where a million enqueues would take minutes. Each row is what
``enqueue`` inserts for the bench job (``enqueue.sql``'s columns; UUIDv7-shaped ids made of the
row's millisecond, so they sort like minted ones; its input and idempotency key as the job's
handle builds them), then ``VACUUM ANALYZE`` and a ``CHECKPOINT``: what autovacuum (off on the
shared server of these runs) and the checkpointer would have done while a real backlog built
up. Redis rows go through the driver's own batch enqueue (one script call per batch,
pipelined), so their shape is the driver's by construction.
"""

from __future__ import annotations

import time
from typing import Any

import asyncpg

# Row g of a fill: created at $3 + g ms, due at $4 + g ms (a ready row: in the past, so the
# rows are claimed in g order; a sleeping row: a day ahead). A sleeping row is a job that ran
# once and parked itself (step.sleep): state 'suspended', its first attempt counted.
# $1 name  $2 queue  $3 first created ms  $4 first due ms  $5 rows  $6 state  $7 first g
JOBS_SQL = """
insert into x_jobs (id, run_id, name, queue, state, input, tenant_id, idempotency_key,
                    attempt, max_attempts, claim, run_at, created_at, updated_at,
                    traceparent, enqueued_by)
select substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.job, 1, 3)
         || '-8' || substr(h.job, 4, 3) || '-' || substr(h.job, 7, 12),
       substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.run, 1, 3)
         || '-9' || substr(h.run, 4, 3) || '-' || substr(h.run, 7, 12),
       $1::text, $2::text, $6::text,
       jsonb_build_object('seq', h.g, 'ts', h.ms / 1000.0),
       null, 'backlog:' || h.g || ':' || (h.ms / 1000.0)::text,
       case when $6::text = 'suspended' then 1 else 0 end, 3,
       case when $6::text = 'suspended' then 1 else 0 end,
       x_ts($4::bigint + h.g), x_ts(h.ms), x_ts(h.ms), null, null
  from (select g, ms, lpad(to_hex(ms), 12, '0') as ms_hex,
               md5('job:' || g) as job, md5('run:' || g) as run
          from (select g, $3::bigint + g as ms
                  from generate_series($7::int, $7::int + $5::int - 1) as g) s) h
"""

# An unpublished outbox row per g, in outbox_stage.sql's shape. $1 name  $2 queue  $3 first
# staged ms  $4 rows
OUTBOX_SQL = """
insert into x_outbox (id, run_id, name, queue, input, tenant_id, idempotency_key,
                      max_attempts, run_at, traceparent, enqueued_by, staged_at)
select substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.job, 1, 3)
         || '-8' || substr(h.job, 4, 3) || '-' || substr(h.job, 7, 12),
       substr(h.ms_hex, 1, 8) || '-' || substr(h.ms_hex, 9, 4) || '-7' || substr(h.run, 1, 3)
         || '-9' || substr(h.run, 4, 3) || '-' || substr(h.run, 7, 12),
       $1::text, $2::text, jsonb_build_object('seq', h.g, 'ts', h.ms / 1000.0), null,
       'outbox:' || h.g, 3, null, null, null, x_ts(h.ms)
  from (select g, ms, lpad(to_hex(ms), 12, '0') as ms_hex,
               md5('job:' || g) as job, md5('run:' || g) as run
          from (select g, $3::bigint + g as ms from generate_series(1, $4::int) as g) s) h
"""

DAY_MS = 86_400_000


async def settle_tables(conn: asyncpg.Connection[Any]) -> None:
    """What autovacuum and the checkpointer would have done by the time a backlog is this big:
    visible tuples and current statistics, and no pending flush landing mid-measure."""
    await conn.execute("vacuum analyze")
    await conn.execute("checkpoint")


async def fill_jobs(
    conn: asyncpg.Connection[Any],
    *,
    rows: int,
    name: str,
    queue: str,
    state: str = "ready",
    first: int = 0,
) -> None:
    """``rows`` rows of job ``name`` in ``queue``: ``ready`` (due, oldest first, from row
    ``first`` on) or ``suspended`` (sleeping for a day)."""
    now = int(time.time() * 1000)
    created = now - 3_600_000 - rows - first  # an hour ago and before, one row a millisecond
    due = created if state == "ready" else now + DAY_MS
    await conn.execute(JOBS_SQL, name, queue, created, due, rows, state, first)


async def fill_outbox(conn: asyncpg.Connection[Any], *, rows: int, name: str, queue: str) -> None:
    now = int(time.time() * 1000)
    await conn.execute(OUTBOX_SQL, name, queue, now - 3_600_000 - rows, rows)
