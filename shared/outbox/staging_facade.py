"""``outbox_jobs_facade()``: the jobs facade that stages inside the ambient transaction.

Inside a bound transaction an enqueue is ONE insert on the caller's connection and answers
the job's real ids (minted at staging); outside one it publishes straight to the driver, or,
with ``mode="required"``, is ``X_OUTBOX_NO_TX``. ``deduped`` is only the publish's to give: a
staged enqueue answers False, and if a LIVE job already holds its idempotency key when the
relay publishes it, nothing is created and the answered ids name no row. A staged enqueue
cannot carry ``debounce`` or ``unique_for`` (``X_ENQUEUE_OPTION_UNSUPPORTED``): enqueue those
jobs outside the transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Literal

from ujobs.context import current_transaction
from ujobs.drivers.base import (
    Enqueued,
    EnqueueRequest,
    JobDriver,
    check_priority,
    refuse_controls,
)
from ujobs.errors import InvariantError, OutboxNoTxError
from ujobs.outbox.contract import OutboxStore

OutboxMode = Literal["optional", "required"]

# The relay publishes a staged row when the transaction has long committed: a debounce would
# time from then, and the outbox row keeps no unique_for; refused rather than dropped.
_STAGED = "an enqueue staged in the outbox (inside a transaction)"


class OutboxJobsFacade:
    """The jobs facade that stages inside the ambient transaction (see the module doc)."""

    def __init__(
        self,
        *,
        store: OutboxStore,
        driver: JobDriver,
        current_tx: Callable[[], Any | None] = current_transaction,
        mode: OutboxMode = "optional",
    ) -> None:
        if mode not in ("optional", "required"):
            raise InvariantError(
                f"outbox mode must be 'optional' or 'required'; got {mode!r}",
                meta={"option": "mode"},
            )
        self.store = store
        self.driver = driver
        self.current_tx = current_tx
        self.mode: OutboxMode = mode

    def _tx(self, what: str) -> Any | None:
        tx = self.current_tx()
        if tx is None and self.mode == "required":
            raise OutboxNoTxError(
                f"{what} outside a transaction, and the outbox is installed with "
                "mode='required'; wrap it in `async with transaction(conn):` (ujobs.context)",
                meta={"mode": self.mode},
            )
        return tx

    async def enqueue(self, request: EnqueueRequest) -> Enqueued:
        tx = self._tx(f"enqueue of {request.name!r}")
        if tx is None:
            return await self.driver.enqueue(request)
        refuse_controls([request], _STAGED)
        check_priority(request.priority)
        (staged,) = await self.store.stage(tx, [request])
        return Enqueued(staged.id, staged.run_id, deduped=False)

    async def enqueue_many(self, requests: Iterable[EnqueueRequest]) -> list[Enqueued]:
        if self.current_tx() is None and self.mode != "required":
            return await self.driver.enqueue_many(requests)  # read as the driver goes
        batch = list(requests)
        if not batch:
            return []
        tx = self._tx(f"enqueue_many of {len(batch)} jobs")  # X_OUTBOX_NO_TX when required
        assert tx is not None  # optional mode without a transaction returned above
        refuse_controls(batch, _STAGED)
        for request in batch:
            check_priority(request.priority)
        staged = await self.store.stage(tx, batch)
        return [Enqueued(s.id, s.run_id, deduped=False) for s in staged]


def outbox_jobs_facade(
    *,
    store: OutboxStore,
    driver: JobDriver,
    current_tx: Callable[[], Any | None] = current_transaction,
    mode: OutboxMode = "optional",
) -> OutboxJobsFacade:
    """The facade to install with ``set_jobs_facade()``. ``current_tx`` answers the ambient
    transaction (default: the connection ``bind_transaction`` bound); ``mode="required"``
    makes an enqueue outside one ``X_OUTBOX_NO_TX`` instead of a direct publish."""
    return OutboxJobsFacade(store=store, driver=driver, current_tx=current_tx, mode=mode)
