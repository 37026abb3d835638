"""The deliverer's HTTP client: one POST, bounded in time and in what it reads back.

Redirects are never followed (a 3xx would re-POST a body signed for one host to whatever host
the receiver named), the connector resolves through the SSRF guard, and at most
``response_limit`` bytes of the answer are read: a receiver streaming an endless body costs one
bounded read, and the ledger keeps an excerpt.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ujobs.webhooks.ssrf import GuardPolicy, check_url

if TYPE_CHECKING:
    # aiohttp is imported when the first session opens: a process that only reads the
    # families (every ``ujobs`` operator command) never loads it.
    import aiohttp
    from aiohttp.abc import AbstractResolver

DEFAULT_RESPONSE_LIMIT = 4096
DEFAULT_CONNECTIONS = 256
MAX_CHECKED_URLS = 4096


@dataclass(frozen=True, slots=True)
class HttpAnswer:
    """What the receiver answered: status, the headers the family reads, a body excerpt."""

    status: int
    retry_after: str | None
    date: str | None
    location: str | None
    excerpt: str
    latency_ms: int


class TransportError(Exception):
    """The POST did not get an answer: connect refused, reset, timed out, TLS, DNS."""

    def __init__(self, kind: str, detail: str, latency_ms: int) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail
        self.latency_ms = latency_ms


class WebhookClient:
    """One aiohttp session on a guarded connector, opened lazily in the running loop."""

    def __init__(
        self,
        policy: GuardPolicy | None = None,
        *,
        resolver: AbstractResolver | None = None,
        connections: int = DEFAULT_CONNECTIONS,
        response_limit: int = DEFAULT_RESPONSE_LIMIT,
    ) -> None:
        self.policy = policy if policy is not None else GuardPolicy()
        self._inner_resolver = resolver
        self._connections = connections
        self.response_limit = response_limit
        self._session: aiohttp.ClientSession | None = None
        self._checked: set[str] = set()
        """URLs ``check_url`` passed under this client's policy (fixed for its life): the
        check is a function of the two, so a URL is parsed once, not on every POST. A host
        named by DNS is still checked on every connect, by the resolver."""

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            import aiohttp

            from ujobs.webhooks.resolver import GuardedResolver

            connector = aiohttp.TCPConnector(
                resolver=GuardedResolver(self.policy, self._inner_resolver),
                limit=self._connections,
                limit_per_host=0,
                ttl_dns_cache=10,
            )
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,
                headers={"user-agent": "ultimate-jobs-webhooks/1"},
            )
        return self._session

    async def post(
        self, url: str, body: bytes, headers: Mapping[str, str], *, timeout_s: float
    ) -> HttpAnswer:
        """POST ``body`` to ``url``; raises ``X_WEBHOOK_ENDPOINT_INVALID`` for a URL or an
        address the guard refuses and ``TransportError`` when no answer came."""
        import aiohttp  # loaded by ``_open`` already: a lookup in sys.modules

        if url not in self._checked:
            check_url(url, self.policy)
            if len(self._checked) >= MAX_CHECKED_URLS:
                self._checked.clear()
            self._checked.add(url)
        session = self._open()
        started = time.monotonic()
        try:
            async with session.post(
                url,
                data=body,
                headers=dict(headers),
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=timeout_s),
            ) as response:
                raw = await response.content.read(self.response_limit)
                return HttpAnswer(
                    status=response.status,
                    retry_after=response.headers.get("retry-after"),
                    date=response.headers.get("date"),
                    location=response.headers.get("location"),
                    excerpt=raw.decode("utf-8", errors="replace"),
                    latency_ms=_since(started),
                )
        except aiohttp.ClientConnectorError as exc:
            # The guard's refusal is not an OSError, so aiohttp lets it through unwrapped.
            raise TransportError("connect", str(exc.os_error), _since(started)) from None
        except TimeoutError:
            raise TransportError(
                "timeout", f"no answer within {timeout_s:g}s", _since(started)
            ) from None
        except aiohttp.ClientError as exc:
            raise TransportError(type(exc).__name__, str(exc), _since(started)) from None
        except OSError as exc:
            raise TransportError("os", str(exc), _since(started)) from None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
        await asyncio.sleep(0)


def _since(started: float) -> int:
    return int((time.monotonic() - started) * 1000)
