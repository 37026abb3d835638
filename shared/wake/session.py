"""What a wake transport provides: one dialled subscription (``WakeSession``).

``ujobs.wake.listener.ChannelWake`` owns the proof, the re-dial and the logs once for every
transport; a transport (``ujobs.wake.transport_redis``, ``ujobs.wake.transport_postgres``) only
dials, publishes a probe through its other path, and says when the session is gone.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

Deliver = Callable[[str, str], None]
"""``deliver(channel, payload)``: how a session hands one notification to its wake."""


class WakeSession(Protocol):
    """One dialled subscription. A new session is made for every dial; none is reused."""

    async def open(self, channels: Sequence[str], deliver: Deliver) -> None:
        """Dial and subscribe to every channel; answer only once the subscription is active
        (a probe published after this returns must be heard)."""
        ...

    async def probe(self, channel: str, token: str) -> None:
        """Publish ``token`` on ``channel`` through a path other than the session's own."""
        ...

    async def lost(self) -> None:
        """Answer when the session has gone (the connection closed or failed)."""
        ...

    async def close(self) -> None:
        """Drop the session (safe on a half-open or failed one, and twice)."""
        ...
