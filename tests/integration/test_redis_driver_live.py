"""One script of operations on the Redis and the memory driver, every answer compared.

The script is generated from a fixed seed, so it is the same script on every run: enqueues
(fresh, deduped on the live key, deduped on an explicit id, minted ids, delayed, in batches),
claims over several queues and workers, acks, nacks (backoff, park, dead letter, fail,
handed back uncounted), heartbeats, steps, stale settles from claims that were replaced, clock
moves that lapse leases and bury final attempts, and stats. Both drivers share one FrozenClock.

Ids the drivers mint differ, so each side maps its minted ids to one name as they appear; an
explicit id is its own name. Every answer is compared after that mapping. The run also checks
it reached every outcome it means to compare, so a script that drifted into a corner (say, never
burying anything) fails instead of passing quietly.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import AsyncIterator, Sequence
from typing import Any

import pytest

from tests.support.redis_keys import redis_test_driver
from ujobs.clock import FrozenClock
from ujobs.drivers.base import (
    ClaimedJob,
    ClaimOptions,
    DriverStats,
    Enqueued,
    EnqueueRequest,
    ExhaustedJob,
    JobDriver,
    NackOptions,
    StepRecord,
)
from ujobs.drivers.memory.driver import MemoryDriver, memory_driver
from ujobs.drivers.redis.driver import RedisDriver

SEED = 20_261_202
OPERATIONS = 420
NAMES = ("alpha", "beta", "gamma")
QUEUES = ("q1", "q2", "q3")
WORKERS = ("w1", "w2", "w3")
EXPECTED_OUTCOMES = {
    "enqueue:new",
    "enqueue:deduped-key",
    "enqueue:deduped-id",
    "enqueue:minted",
    "enqueue_many",
    "claim:some",
    "claim:none",
    "claim:buried-dead",
    "claim:buried-failed",
    "claim:lapsed-retaken",
    "ack:landed",
    "ack:refused",
    "nack:retry",
    "nack:park",
    "nack:dead",
    "nack:fail",
    "nack:uncounted",
    "nack:refused",
    "heartbeat:renewed",
    "heartbeat:lost",
    "save_step:landed",
    "save_step:refused",
    "load_steps:some",
    "stats",
}


class Ids:
    """One driver's ids, as names both drivers share."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def name(self, value: str) -> str:
        return self.names.get(value, value)


@dataclasses.dataclass
class Pair:
    """The same claimed job as each driver handed it out."""

    mem: ClaimedJob
    red: ClaimedJob


class Comparison:
    def __init__(self, mem: MemoryDriver, red: RedisDriver, clock: FrozenClock) -> None:
        self.mem = mem
        self.red = red
        self.clock = clock
        self.rng = random.Random(SEED)
        self.mem_ids = Ids()
        self.red_ids = Ids()
        self.minted = 0
        self.serial = 0
        self.keys: list[tuple[str, str | None, str]] = []  # (name, tenant, key) ever used
        self.ids: list[str] = []  # explicit ids ever used
        # (memory run_id, redis run_id, tenant): a run_id is a namespace of its tenant
        self.runs: list[tuple[str, str, str | None]] = []
        self.held: list[Pair] = []  # claims not yet settled by us
        self.stale: list[Pair] = []  # claims settled, or replaced by a later claim
        self.outcomes: set[str] = set()
        self.step = 0
        self.compared = 0

    # -- normalising answers -----------------------------------------------------------
    def norm(self, ids: Ids, value: Any) -> Any:
        if isinstance(value, Enqueued):
            return (ids.name(value.id), ids.name(value.run_id), value.deduped)
        if isinstance(value, ClaimedJob | ExhaustedJob):
            row = dataclasses.asdict(value)
            row["id"] = ids.name(row["id"])
            row["run_id"] = ids.name(row["run_id"])
            row.pop("store_epoch", None)  # the Redis keyspace mark: no memory counterpart
            return row
        if isinstance(value, list):
            return [self.norm(ids, v) for v in value]
        if isinstance(value, StepRecord):
            # seq is each driver's own insertion counter: compare the order it gives, not it.
            return (value.name, value.output, value.started_at_ms, value.finished_at_ms)
        if isinstance(value, DriverStats):
            return {q: dataclasses.asdict(s) for q, s in sorted(value.queues.items())}
        return value

    def same(self, what: str, mem: Any, red: Any) -> Any:
        self.compared += 1
        left, right = self.norm(self.mem_ids, mem), self.norm(self.red_ids, red)
        assert left == right, f"operation {self.step} ({what}) answers differ"
        return left

    # -- operations --------------------------------------------------------------------
    def request(self) -> tuple[EnqueueRequest, str]:
        """A request and what it means to meet: ``fresh``, ``reuse-key`` or ``reuse-id``."""
        rng = self.rng
        intent = "fresh"
        self.serial += 1
        roll = rng.random()
        name, tenant, key = rng.choice(NAMES), rng.choice((None, "t1", "")), f"k{self.serial}"
        if roll < 0.2 and self.keys:
            name, tenant, key = rng.choice(self.keys)  # the live key, if a live row holds it
            intent = "reuse-key"
        self.keys.append((name, tenant, key))
        job_id: str | None = f"j{self.serial}"
        if 0.2 <= roll < 0.3 and self.ids:
            job_id = rng.choice(self.ids)  # an id that already names a row
            intent = "reuse-id"
        elif 0.3 <= roll < 0.4:
            job_id = None  # minted by the driver
        else:
            self.ids.append(f"j{self.serial}")
        run_at = None
        if rng.random() < 0.25:
            run_at = self.clock.now_ms() + rng.choice((-50, 300, 2_000, 6_000))
        request = EnqueueRequest(
            name=name,
            input={"n": self.serial, "big": 2**53 + self.serial, "s": f"ü{self.serial}"},
            idempotency_key=key,
            queue=rng.choice(QUEUES),
            tenant_id=tenant,
            max_attempts=rng.choice((1, 2, 3)),
            run_at_ms=run_at,
            id=job_id,
            run_id=None if rng.random() < 0.3 else f"r{self.serial}",
            traceparent=rng.choice((None, f"tp{self.serial}")),
            enqueued_by=rng.choice((None, "tester")),
        )
        return request, intent

    def learn(
        self, asked: Sequence[tuple[EnqueueRequest, str]], mem: list[Enqueued], red: list[Enqueued]
    ) -> None:
        """Name the ids each driver minted for rows it inserted, then compare the answers."""
        for (request, _), m, r in zip(asked, mem, red, strict=True):
            if m.deduped or r.deduped:
                continue
            if request.id is None:
                self.minted += 1
                self.mem_ids.names[m.id] = self.red_ids.names[r.id] = f"minted{self.minted}"
            if request.run_id is None:
                self.minted += 1
                name = f"minted-run{self.minted}"
                self.mem_ids.names[m.run_id] = self.red_ids.names[r.run_id] = name
            self.runs.append((m.run_id, r.run_id, request.tenant_id))
        answers = self.same("enqueue", mem, red)
        for (request, intent), (_, _, deduped) in zip(asked, answers, strict=True):
            if not deduped:
                self.outcomes.add("enqueue:minted" if request.id is None else "enqueue:new")
            elif intent == "reuse-id":
                self.outcomes.add("enqueue:deduped-id")
            else:
                self.outcomes.add("enqueue:deduped-key")

    async def enqueue(self) -> None:
        asked = self.request()
        request = asked[0]
        self.learn([asked], [await self.mem.enqueue(request)], [await self.red.enqueue(request)])

    async def enqueue_many(self) -> None:
        asked = [self.request() for _ in range(self.rng.randint(1, 5))]
        if len(asked) > 1 and self.rng.random() < 0.5:
            asked.append((asked[0][0], "reuse-id"))  # the same row twice in one batch
        requests = [request for request, _ in asked]
        mem = await self.mem.enqueue_many(requests)
        red = await self.red.enqueue_many(requests)
        self.learn(asked, mem, red)
        self.outcomes.add("enqueue_many")

    async def claim(self) -> None:
        rng = self.rng
        queues = rng.sample(QUEUES, rng.randint(1, 3))
        told: dict[str, list[list[ExhaustedJob]]] = {"mem": [], "red": []}

        def recorder(side: str) -> Any:
            async def on_exhausted(rows: Sequence[ExhaustedJob]) -> None:
                told[side].append(list(rows))

            return on_exhausted

        base: dict[str, Any] = {
            "queues": queues,
            "limit": rng.randint(1, 4),
            "worker_id": rng.choice(WORKERS),
            "visibility_ms": rng.choice((1_000, 2_000, 3_000)),
            "drop_exhausted": frozenset({"gamma"}),
        }
        mem = await self.mem.claim(ClaimOptions(**base, on_exhausted=recorder("mem")))
        red = await self.red.claim(ClaimOptions(**base, on_exhausted=recorder("red")))
        self.same("claim", mem, red)
        self.same("claim on_exhausted", told["mem"], told["red"])
        assert len(told["mem"]) <= 1, "on_exhausted is told at most once per pass"
        for rows in told["mem"]:
            for row in rows:
                self.outcomes.add(f"claim:buried-{row.state}")
        self.outcomes.add("claim:some" if mem else "claim:none")
        for m, r in zip(mem, red, strict=True):
            replaced = [p for p in self.held if p.mem.id == m.id]
            if replaced:
                self.outcomes.add("claim:lapsed-retaken")
            for p in replaced:
                self.held.remove(p)
                self.stale.append(p)
            self.held.append(Pair(m, r))

    def pick(self) -> tuple[Pair, bool] | None:
        """A claim to settle: mostly one we hold, sometimes a stale one."""
        if self.stale and (not self.held or self.rng.random() < 0.2):
            return self.rng.choice(self.stale), True
        if self.held:
            return self.rng.choice(self.held), False
        return None

    def settled(self, pair: Pair, was_stale: bool) -> None:
        if not was_stale:
            self.held.remove(pair)
            self.stale.append(pair)

    async def ack(self) -> None:
        picked = self.pick()
        if picked is None:
            return
        pair, was_stale = picked
        duration = self.rng.choice((None, 0, 17, 250))
        mem = await self.mem.ack(pair.mem.id, pair.mem.ref, duration_ms=duration)
        red = await self.red.ack(pair.red.id, pair.red.ref, duration_ms=duration)
        self.outcomes.add("ack:landed" if self.same("ack", mem, red) else "ack:refused")
        self.settled(pair, was_stale)

    async def nack(self) -> None:
        picked = self.pick()
        if picked is None:
            return
        pair, was_stale = picked
        now = self.clock.now_ms()
        kind, options = self.rng.choice(
            (
                (
                    "retry",
                    NackOptions(
                        error="boom",
                        run_at_ms=now + self.rng.choice((0, 400, 3_000)),
                        duration_ms=5,
                    ),
                ),
                ("park", NackOptions(park=True, count=False, run_at_ms=now + 1_500)),
                ("dead", NackOptions(dead_letter=True, error="terminal")),
                ("fail", NackOptions(fail=True, error="refused", count=False)),
                ("uncounted", NackOptions(count=False, run_at_ms=now + 100)),
            )
        )
        mem = await self.mem.nack(pair.mem.id, pair.mem.ref, options)
        red = await self.red.nack(pair.red.id, pair.red.ref, options)
        self.outcomes.add(f"nack:{kind}" if self.same("nack", mem, red) else "nack:refused")
        self.settled(pair, was_stale)

    async def heartbeat(self) -> None:
        picked = self.pick()
        if picked is None:
            return
        pair, _ = picked
        visibility = self.rng.choice((500, 2_000))
        mem = await self.mem.heartbeat(pair.mem.id, pair.mem.ref, visibility)
        red = await self.red.heartbeat(pair.red.id, pair.red.ref, visibility)
        self.outcomes.add(f"heartbeat:{self.same('heartbeat', mem, red)}")

    async def steps(self) -> None:
        picked = self.pick()
        if picked is not None:
            pair, _ = picked
            name = self.rng.choice(("s1", "s2", "s3"))
            output = {"step": name, "at": self.clock.now_ms()}
            started = self.clock.now_ms() - 3
            mem = await self.mem.save_step(
                pair.mem.id, pair.mem.ref, pair.mem.run_id, name, output, started_at_ms=started
            )
            red = await self.red.save_step(
                pair.red.id, pair.red.ref, pair.red.run_id, name, output, started_at_ms=started
            )
            landed = self.same("save_step", mem, red)
            self.outcomes.add("save_step:landed" if landed else "save_step:refused")
        if self.runs:
            mem_run, red_run, tenant = self.rng.choice(self.runs)
            loaded = self.same(
                "load_steps",
                await self.mem.load_steps(mem_run, tenant_id=tenant),
                await self.red.load_steps(red_run, tenant_id=tenant),
            )
            if loaded:
                self.outcomes.add("load_steps:some")

    async def stats(self) -> None:
        self.same("stats", await self.mem.stats(), await self.red.stats())
        self.outcomes.add("stats")

    def advance(self) -> None:
        self.clock.advance(self.rng.choice((1, 50, 400, 1_200, 3_500)))

    async def run(self) -> None:
        ops = (
            (self.enqueue, 22),
            (self.enqueue_many, 5),
            (self.claim, 20),
            (self.ack, 10),
            (self.nack, 10),
            (self.heartbeat, 8),
            (self.steps, 8),
            (self.stats, 4),
        )
        choices = [op for op, _ in ops]
        weights = [w for _, w in ops]
        for step in range(OPERATIONS):
            self.step = step
            if self.rng.random() < 0.2:
                self.advance()
            await self.rng.choices(choices, weights)[0]()
        await self.stats()


def memory_buckets(driver: MemoryDriver) -> list[tuple[str, int, int, int, int, int, int]]:
    return sorted(
        (job, start, b.done, b.retried, b.failed, b.dead, b.duration_ms)
        for (job, _, start), b in driver.state.counters.items()
    )


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock(1_700_000_000_000)


@pytest.fixture
async def red(redis_url: str, redis_prefix: str, clock: FrozenClock) -> AsyncIterator[RedisDriver]:
    async with redis_test_driver(redis_url, redis_prefix, clock=clock) as drv:
        yield drv


async def test_redis_answers_as_the_memory_driver(red: RedisDriver, clock: FrozenClock) -> None:
    mem = memory_driver(clock=clock)
    assert isinstance(mem, JobDriver)
    assert isinstance(red, JobDriver)
    comparison = Comparison(mem, red, clock)
    await comparison.run()
    assert comparison.compared >= 400
    missing = EXPECTED_OUTCOMES - comparison.outcomes
    assert not missing, f"the script never reached {sorted(missing)}"
    # The counters each settle moved, bucket by bucket.
    red_buckets = []
    for name in NAMES:
        red_buckets += [
            (b.job, b.bucket_start_ms, b.done, b.retried, b.failed, b.dead, b.duration_ms)
            for b in await red.counter_buckets(name, 0)
        ]
    red_buckets.sort()
    assert red_buckets == memory_buckets(mem)
    assert red_buckets
