"""``RequestRows``: one job's batch enqueue as what its requests share and what each input
decides, read once; an ``Iterable[EnqueueRequest]`` to every driver and facade.

A batch enqueue (``JobHandle.enqueue_many``) queues hundreds of requests that differ only in
their input, idempotency key, tenant, fleet slot key and due time. Building each as an
``EnqueueRequest`` (fifteen fields) and reading each one's shared fields back cost the client
more than its checks: a driver that writes rows itself (the Postgres COPY) reads ``rows()``
and ``shared`` instead and builds no request; anything else iterates it and gets exactly the
requests ``JobHandle.request`` builds for each input, in order.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from ujobs.drivers.records import EnqueueRequest

Checked = tuple[Any, bytes, str, str | None, str | None]
"""What one input decides, checked: (the input as stored, its JSON text as orjson writes it,
its idempotency key, its tenant, its fleet slot's lease key)."""

Row = tuple[Any, bytes, str, str | None, str | None, int | None]
"""A ``Checked`` and its due time (``run_at_ms``): everything of a request ``shared`` lacks."""


class RequestRows:
    """The requests of one batch: ``check`` decides each input's part (raising what the
    input's own enqueue raises), ``share`` the fields all of them share, asked once, right
    after the first input was checked (the order a single enqueue checks them in), and
    ``due``, when given, each row's ``run_at_ms`` (a delay: each row its own clock read).

    One pass, as the generator it replaces: a second iteration yields nothing."""

    __slots__ = ("_check", "_due", "_inputs", "_share", "run_ats", "shared")

    def __init__(
        self,
        inputs: Iterable[Any],
        check: Callable[[Any], Checked],
        share: Callable[[], EnqueueRequest],
        due: Callable[[], int] | None,
    ) -> None:
        self._inputs = iter(inputs)
        self._check = check
        self._share = share
        self._due = due
        self.shared: EnqueueRequest | None = None
        """The fields every request shares (its own input, key, tenant, slot key and due
        time are placeholders); None until the first input was checked."""
        self.run_ats: list[int] | None = None if due is None else []
        """Each row's ``run_at_ms`` so far, when they differ (``due`` given); else every
        row's is ``shared.run_at_ms``."""

    def rows(self) -> Iterator[Row]:
        """Each input's row, checked as it is read."""
        check, due, run_ats = self._check, self._due, self.run_ats
        for value in self._inputs:
            checked = check(value)
            shared = self.shared
            if shared is None:
                shared = self.shared = self._share()
            # Concatenated: one tuple copy, where unpacking into a new tuple builds a list first.
            if due is None or run_ats is None:
                yield checked + (shared.run_at_ms,)  # noqa: RUF005
            else:
                run_at = due()
                run_ats.append(run_at)
                yield checked + (run_at,)  # noqa: RUF005

    def request(self, row: Row) -> EnqueueRequest:
        """The ``EnqueueRequest`` of ``row`` (one of ``rows()``)."""
        s = self.shared
        assert s is not None  # a row is only yielded once shared is known
        stored, _, key, tenant, slot_key, run_at_ms = row
        return EnqueueRequest(
            s.name,
            stored,
            key,
            s.queue,
            tenant,
            s.max_attempts,
            run_at_ms,
            None,
            None,
            s.traceparent,
            s.enqueued_by,
            s.debounce_ms,
            s.unique_for_ms,
            s.priority,
            slot_key,
        )

    def __iter__(self) -> Iterator[EnqueueRequest]:
        request = self.request
        for row in self.rows():
            yield request(row)


__all__ = ["Checked", "RequestRows", "Row"]
