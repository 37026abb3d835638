"""``StoreWatch``: the capability of a store that can lose its whole keyspace under a running
worker, and can tell when it did.

A Redis restarted without persistence (``--save "" --appendonly no``, or RDB/AOF files lost)
comes back empty: every row, step, dedupe key and counter of the deployment is gone, and a
worker still holding rows only sees its renewals and settles refused, one row at a time, as if
each lease had been lost. The Redis driver keeps a MARK in its keyspace (``{prefix}:store``, a
random token, written by the first claim that finds none); every claim reads it back, and a
process that finds another token than the one it saw — or none — knows the keyspace was wiped.
``ujobs.execution.store_loss`` turns that into ONE error per loss instead of a warning per row.

Postgres and memory drivers answer ``store_watch = None``: a Postgres restart keeps what was
committed, and the memory driver dies with its process.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


@runtime_checkable
class StoreWatch(Protocol):
    """The keyspace mark of one deployment, as this process last saw it."""

    @property
    def prefix(self) -> str:
        """The deployment's key prefix (what the report names)."""
        ...

    @property
    def epoch(self) -> str | None:
        """The mark this process saw last (None before its first claim or ``verify``)."""
        ...

    async def verify(self) -> str:
        """Read the mark now (writing a fresh one when there is none); answers it. A mark other
        than ``epoch`` means every row claimed under ``epoch`` is gone."""
        ...


__all__ = ["StoreWatch"]
