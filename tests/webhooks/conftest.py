"""The webhook tests' fixtures: a partner's endpoint (a real local aiohttp server)."""

from __future__ import annotations

from tests.support.webhook_receiver import receiver

__all__ = ["receiver"]
