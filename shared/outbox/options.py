"""``RelayOptions``: the relay's settings, validated once, frozen.

A bad value fails at construction with its option's name: ``claim_lease_ms`` with
``X_INVARIANT`` (it fences rows between relays), the rest with ``X_CONFIG_INVALID``.
``idle_poll_max_ms`` is the idle ceiling and cannot be below ``interval_ms``, the floor; with
none the ceiling follows the wake (``ujobs.wake.protocol.idle_ceiling_ms``). ``relay_id``
defaults to ``<host>:<pid>:<6 hex>``; ``drain_on_shutdown=False`` keeps the relay out of the
process lifecycle (it then stops only when told).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field

from ujobs.errors import ConfigInvalidError, InvariantError, UltimateError
from ujobs.ids import new_id

DEFAULT_CLAIM_LEASE_MS = 30_000
DEFAULT_BATCH_SIZE = 100
DEFAULT_INTERVAL_MS = 200

__all__ = [
    "DEFAULT_BATCH_SIZE",
    "DEFAULT_CLAIM_LEASE_MS",
    "DEFAULT_INTERVAL_MS",
    "RelayOptions",
    "default_relay_id",
]


def default_relay_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()[-6:]}"


def _whole_ms(value: object, option: str, *, code: type[UltimateError] = ConfigInvalidError) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise code(
            f"{option} must be a positive whole number of milliseconds; got {value!r}",
            meta={"option": option},
        )
    return value


@dataclass(frozen=True, slots=True)
class RelayOptions:
    """Everything a relay needs besides its store, driver, wake and clock."""

    claim_lease_ms: int = DEFAULT_CLAIM_LEASE_MS
    batch_size: int = DEFAULT_BATCH_SIZE
    interval_ms: int = DEFAULT_INTERVAL_MS
    idle_poll_max_ms: int | None = None
    relay_id: str = field(default_factory=default_relay_id)
    drain_on_shutdown: bool = True

    def __post_init__(self) -> None:
        _whole_ms(self.claim_lease_ms, "claim_lease_ms", code=InvariantError)
        batch = self.batch_size
        if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
            raise ConfigInvalidError(
                f"batch_size must be a whole number of at least 1; got {batch!r}",
                meta={"option": "batch_size"},
            )
        _whole_ms(self.interval_ms, "interval_ms")
        if self.idle_poll_max_ms is not None:
            _whole_ms(self.idle_poll_max_ms, "idle_poll_max_ms")
            if self.idle_poll_max_ms < self.interval_ms:
                raise ConfigInvalidError(
                    f"idle_poll_max_ms ({self.idle_poll_max_ms}) is the idle CEILING and cannot "
                    f"be below interval_ms ({self.interval_ms}), the floor",
                    meta={"option": "idle_poll_max_ms"},
                )
