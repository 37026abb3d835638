"""The settlements relay: ``x_settlements`` rows (written in each settle's own statement by
the Postgres driver with ``UJOBS_NATS_SETTLEMENTS=on``) out to ``UJOBS_SETTLED``.

One message per settlement on ``ujobs.settled.<job>``::

    {"id", "runId", "name", "tenant", "outcome", "code", "attempt", "settledAt"}

``outcome`` is ``completed``, ``retried``, ``failed``, ``dead`` or ``cancelled``; ``code`` the
error's ``X_…`` code (None on a completion, a cancel or an error that is not ours;
``LEASE_LAPSED_FINAL_ATTEMPT`` on a claim's burial); ``settledAt`` epoch milliseconds.
Opt-in, per job (``UJOBS_NATS_SETTLEMENT_RESULTS``, ``SettlementResults``): a ``completed``
settlement also carries ``result``, the job's stored result as the relay reads it when it
publishes (the result of the row's latest done run), or ``"result": null`` with
``"resultTooLarge": true`` past ``UJOBS_RESULT_MAX_BYTES``; other settlements and jobs never
carry the field. The Redis relay carries no results.
The header ``Nats-Msg-Id`` is ``<job id>:<attempt>:<outcome>:<seq>``, so a re-publish (a relay
that died between the publish ack and marking the row) is dropped by the stream's duplicate
window (10 minutes). ``seq`` is the outbox row's own: ``ujobs jobs retry`` resets a job's
attempts, so its re-run can end with the same id, attempt and outcome inside the window, and
without it that second settlement would be dropped as a copy of the first.

At least once, never lost, in order per job: a batch is the oldest pending rows in ``seq``
order, locked for this relay's transaction; it is published in waves in which no job
appears twice (``publish_waves``, the Redis relay's too: each wave's publishes sent together
with ``publish_async``, then every ack awaited, ``publish_timeout_s`` at most), and the
first failed publish stops the batch: what was acked is marked published, the rest stays pending,
so no settlement of a job goes out before an earlier one of the same job. NATS down: every
publish fails, nothing is marked, the rows wait in Postgres and the relay tries again every
``retry_s`` until NATS answers.

One relay publishes at a time, whatever the number of api replicas: the claim takes the
transaction-scoped advisory lock ``RELAY_LOCK_KEY`` in its own statement and a relay that
does not get it claims nothing until its next look. Locked rows alone (``skip locked``)
would let a second relay skip a job's earlier settlement, still in the first relay's hands,
and publish its later one first. A replica's relay is a standby, not extra throughput: one
relay publishes a backlog faster than a drain settles it (bench/RESULTS.md).

With nothing pending the relay looks again after ``FIRST_LOOK_S`` (5 ms), doubling the pause
at each empty look up to ``IDLE_S`` (50 ms: one probe of a partial index; ``idle_pauses``):
while settlements flow (a drain) one leaves within a few milliseconds of its commit, and a
quiet relay costs 20 probes a second. Published rows are the built-in ``x.purge`` sweep's
(``settlements_purge_target``: published over ``UJOBS_PURGE_SETTLEMENTS_RETENTION_MS``, a day
by default, ago; pending rows never), not the relay's.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import orjson
from nats.js import JetStreamContext

from ujobs.clock import SYSTEM_CLOCK, Clock
from ujobs.drivers.postgres.sql import query
from ujobs.results import DEFAULT_RESULT_MAX_BYTES
from ujobs.services.nats.names import NatsNames

if TYPE_CHECKING:
    import asyncpg

    Pool = asyncpg.Pool[Any]

log = logging.getLogger("ujobs.nats")

_CLAIM = query("settlements_claim")
_MARK = query("settlements_mark_published")

MSG_ID = "Nats-Msg-Id"
DEFAULT_BATCH = 500
IDLE_S = 0.05
FIRST_LOOK_S = 0.005
RETRY_S = 1.0
PUBLISH_TIMEOUT_S = 5.0
RELAY_LOCK_KEY = 0x756A6F6273_5354
"""The advisory lock the relays of one database take in turn ("ujobs" "ST"; the
migrations' ``MIGRATE_LOCK_KEY`` is another)."""


@dataclass(frozen=True, slots=True)
class SettlementResults:
    """Which ``completed`` settlements carry their job's result (``UJOBS_NATS_SETTLEMENT_
    RESULTS``: ``jobs`` by name, or ``every`` job) and the most bytes one may carry."""

    jobs: tuple[str, ...] = ()
    every: bool = False
    max_bytes: int = DEFAULT_RESULT_MAX_BYTES

    @classmethod
    def of(cls, names: tuple[str, ...], max_bytes: int) -> SettlementResults:
        every = names == ("*",)
        return cls(() if every else names, every, max_bytes)


def settlement_message(row: Any) -> tuple[bytes, str]:
    """The body and the ``Nats-Msg-Id`` of one ``x_settlements`` row (a Redis stream entry
    has the same keys, never a result)."""
    body: dict[str, Any] = {
        "id": row["job_id"],
        "runId": row["run_id"],
        "name": row["name"],
        "tenant": row["tenant_id"],
        "outcome": row["outcome"],
        "code": row["code"],
        "attempt": row["attempt"],
        "settledAt": row["settled_at_ms"],
    }
    state = row.get("result_state")
    if state == "shown":
        body["result"] = orjson.Fragment(row["result"])
    elif state == "too-large":
        body["result"] = None
        body["resultTooLarge"] = True
    msg_id = f"{row['job_id']}:{row['attempt']}:{row['outcome']}:{row['seq']}"
    return orjson.dumps(body), msg_id


def idle_pauses() -> Iterator[float]:
    """The pauses after successive empty looks: ``FIRST_LOOK_S``, doubling, then ``IDLE_S``."""
    pause = FIRST_LOOK_S
    while True:
        yield pause
        pause = min(IDLE_S, pause * 2)


def waves(rows: list[Any]) -> list[list[Any]]:
    """``rows`` (in seq order) cut where a job appears again: a job's settlements land in
    successive waves, so its order on the stream is its order here."""
    out: list[list[Any]] = []
    seen: set[str] = set()
    for row in rows:
        if not out or row["job_id"] in seen:
            out.append([])
            seen = set()
        out[-1].append(row)
        seen.add(row["job_id"])
    return out


async def publish_waves(
    js: JetStreamContext, names: NatsNames, rows: list[Any], timeout_s: float
) -> tuple[list[Any], BaseException | None]:
    """``rows`` (in order) published wave after wave (``waves``), stopping at the first
    failed publish: answers the acked rows' ``seq``s and that failure. Both relays' publish
    (Postgres and Redis): what differs between them is only where the rows wait."""
    done: list[Any] = []
    for wave in waves(rows):
        acked, failure = await _wave(js, names, wave, timeout_s)
        done.extend(acked)
        if failure is not None:
            return done, failure
    return done, None


async def _wave(
    js: JetStreamContext, names: NatsNames, wave: list[Any], timeout_s: float
) -> tuple[list[Any], BaseException | None]:
    """Every row of ``wave`` sent (``publish_async``: buffered, no task or request each),
    then every ack awaited together; answers the acked rows' seqs and the first failure."""
    sent: list[tuple[Any, asyncio.Future[Any]]] = []
    failure: BaseException | None = None
    for row in wave:
        body, msg_id = settlement_message(row)
        try:
            future = await js.publish_async(
                names.settled_subject(row["name"]), body, headers={MSG_ID: msg_id}
            )
        except Exception as exc:  # the connection closed: the rest stays pending
            failure = exc
            break
        sent.append((row, future))
    if sent:
        _, late = await asyncio.wait([f for _, f in sent], timeout=timeout_s)
        for future in late:
            future.cancel()
    acked: list[Any] = []
    for row, future in sent:
        if not future.cancelled() and future.exception() is None:
            acked.append(row["seq"])
        elif failure is None:
            failure = (
                TimeoutError(f"no publish ack within {timeout_s} s")
                if future.cancelled()
                else future.exception()
            )
    return acked, failure


class RelayLoop:
    """The loop both settlements relays share: ``start()`` / ``stop()`` (both safe twice) run
    ``run_once()`` until stopped, pausing after an empty pass (``idle()``'s pauses) and
    ``retry_s`` after a failed one (NATS or the store away: what was not published stays)."""

    def __init__(
        self,
        js: JetStreamContext,
        names: NatsNames,
        *,
        batch: int,
        retry_s: float,
        publish_timeout_s: float,
    ) -> None:
        self.js = js
        self.names = names
        self.batch = batch
        self.retry_s = retry_s
        self.publish_timeout_s = publish_timeout_s
        self.published = 0
        self.failures = 0
        self._task: asyncio.Task[None] | None = None
        self._stopping = asyncio.Event()

    async def start(self) -> None:
        if self._task is None:
            self._stopping.clear()
            self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        self._stopping.set()
        task, self._task = self._task, None
        if task is not None:
            await asyncio.gather(task, return_exceptions=True)

    async def run_once(self) -> int:
        raise NotImplementedError

    def idle(self) -> Iterator[float]:
        """The pauses after successive empty passes."""
        return idle_pauses()

    async def _run(self) -> None:
        idle = self.idle()
        while not self._stopping.is_set():
            pause = 0.0
            try:
                if await self.run_once() == 0:
                    pause = next(idle)
                else:
                    idle = self.idle()
            except Exception as exc:
                self.failures += 1
                log.warning("ujobs.nats.settlements-retry", extra={"error": exc})
                pause = self.retry_s
            if pause:
                with contextlib.suppress(asyncio.TimeoutError):
                    await asyncio.wait_for(self._stopping.wait(), pause)


class SettlementsRelay(RelayLoop):
    """``run_once()`` relays one batch of the Postgres settlements outbox and answers how many
    rows it published (tests, the bench)."""

    def __init__(
        self,
        pool: Pool,
        js: JetStreamContext,
        names: NatsNames,
        *,
        clock: Clock = SYSTEM_CLOCK,
        batch: int = DEFAULT_BATCH,
        retry_s: float = RETRY_S,
        publish_timeout_s: float = PUBLISH_TIMEOUT_S,
        results: SettlementResults | None = None,
    ) -> None:
        super().__init__(
            js, names, batch=batch, retry_s=retry_s, publish_timeout_s=publish_timeout_s
        )
        self.pool = pool
        self.clock = clock
        self.results = results or SettlementResults()

    async def run_once(self) -> int:
        async with self.pool.acquire() as conn, conn.transaction():
            wanted = self.results
            rows = list(
                await conn.fetch(
                    _CLAIM,
                    self.batch,
                    RELAY_LOCK_KEY,
                    list(wanted.jobs),
                    wanted.every,
                    wanted.max_bytes,
                )
            )
            if not rows:
                return 0
            done, failure = await publish_waves(self.js, self.names, rows, self.publish_timeout_s)
            if done:
                await conn.execute(_MARK, done, self.clock.now_ms())
        self.published += len(done)
        if failure is not None:
            raise failure
        return len(done)


__all__ = [
    "RELAY_LOCK_KEY",
    "RelayLoop",
    "SettlementResults",
    "SettlementsRelay",
    "idle_pauses",
    "publish_waves",
    "settlement_message",
    "waves",
]
