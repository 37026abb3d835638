"""The SSRF guard's resolver: the addresses a delivery's connection may use.

``ujobs.webhooks.ssrf`` holds the rule (``check_url``, ``refused_reason``); this is the piece
of it that runs inside aiohttp's connector, at connect time, on the addresses the socket then
uses, so DNS rebinding cannot answer one address to a check and another to the connect. It
lives apart from the rule so that reading the rule (the store, every ``ujobs`` operator
command) does not import aiohttp; the deliverer's client imports it when it opens its session.
"""

from __future__ import annotations

import ipaddress
import socket

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from ujobs.webhooks.ssrf import GuardPolicy, refusal_error, refused_reason


class GuardedResolver(AbstractResolver):
    """Resolves through ``inner`` and drops every address the policy refuses; refuses the host
    when none is left. The connector connects only to what this answers."""

    def __init__(self, policy: GuardPolicy, inner: AbstractResolver | None = None) -> None:
        self._policy = policy
        self._inner = inner if inner is not None else DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        answers = await self._inner.resolve(host, port, family)
        kept: list[ResolveResult] = []
        refused: list[tuple[str, str]] = []
        for answer in answers:
            why = refused_reason(ipaddress.ip_address(answer["host"]), self._policy)
            if why is None:
                kept.append(answer)
            else:
                refused.append((answer["host"], why))
        if not kept:
            if refused:
                raise refusal_error(host, refused[0][0], refused[0][1])
            raise OSError(f"no address for {host!r}")
        return kept

    async def close(self) -> None:
        await self._inner.close()
