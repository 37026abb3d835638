"""The Redis driver's settlements outbox, read from outside the driver (the api's relay).

With ``settlements=True`` every script that ends a run adds one entry to the stream
``{prefix}:settled`` (``lua/prelude.lua``'s ``settled_out``), atomically with the row's move,
as the Postgres driver inserts into ``x_settlements`` in the settle's statement. This module
is the other end: ``oldest(n)`` reads the first entries in stream order (the order the
endings happened, so in order per job), ``forget(seqs)`` deletes the ones JetStream acked,
``pending()`` says how many wait. An entry is only ever deleted after its publish was acked:
with NATS away the stream keeps growing, never losing one; nothing trims it.

A row is the shape ``ujobs.services.nats.settlements.settlement_message`` reads, with ``seq`` the
entry's stream id (a string here, a bigint on Postgres).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.asyncio import Redis, RedisCluster


def settlements_key(prefix: str) -> str:
    """The stream of the deployment ``prefix`` (under its hash tag, as every key)."""
    return f"{{{prefix}}}:settled"


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def settlement_row(entry_id: bytes | str, fields: dict[Any, Any]) -> dict[str, Any]:
    """One stream entry as a settlements row."""
    got = {_text(k): _text(v) for k, v in fields.items()}
    return {
        "seq": _text(entry_id),
        "job_id": got["id"],
        "run_id": got["run_id"],
        "name": got["name"],
        "tenant_id": got.get("tenant"),
        "outcome": got["outcome"],
        "code": got.get("code"),
        "attempt": int(got["attempt"]),
        "settled_at_ms": int(got["settled_at"]),
    }


class RedisSettlementsOutbox:
    """The stream ``{prefix}:settled`` of one Redis driver deployment."""

    def __init__(self, client: Redis | RedisCluster, prefix: str) -> None:
        self.client = client
        self.key = settlements_key(prefix)

    async def oldest(self, limit: int) -> list[dict[str, Any]]:
        """The first ``limit`` entries, oldest first."""
        entries: list[Any] = await self.client.xrange(self.key, "-", "+", count=limit) or []
        return [settlement_row(entry_id, fields) for entry_id, fields in entries]

    async def forget(self, seqs: Sequence[str]) -> int:
        """Delete the entries whose publish was acked; answers how many were still there."""
        if not seqs:
            return 0
        return int(await self.client.xdel(self.key, *seqs))

    async def pending(self) -> tuple[int, int | None]:
        """How many entries wait, and the oldest one's ``settled_at`` (epoch ms)."""
        count = int(await self.client.xlen(self.key))
        first = await self.oldest(1)
        return count, first[0]["settled_at_ms"] if first else None


__all__ = ["RedisSettlementsOutbox", "settlement_row", "settlements_key"]
