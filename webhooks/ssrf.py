"""The SSRF guard: a partner's URL may only reach the public internet.

An endpoint URL is written by a stranger, so the deliverer resolves the host itself and refuses
loopback, private, link-local (cloud metadata at 169.254.169.254 included), shared (CGNAT,
where some clouds put theirs), multicast, reserved and unspecified addresses. The check runs
inside the connector's resolver (``ujobs.webhooks.resolver``), at connect time, on the
addresses the socket then uses: a check made earlier (when the endpoint was registered, or a
lookup before the request) would let DNS rebinding answer a public address to the check and
a private one to the connect.
An IP literal never reaches a resolver, so ``check_url`` refuses those up front, in every
spelling a resolver or the HTTP client would turn into an address (``0x7f.1``, ``2130706433``,
``0177.0.0.1``, ``127.1``, ``[::ffff:127.0.0.1]``, full-width digits, a trailing dot), and
``localhost`` with every ``*.localhost`` name (RFC 6761: always loopback). ``check_url`` is the
one rule: registration (the store) and every delivery (the client) call it, so an endpoint
refused at delivery is refused when it is added, with the same message.

``UJOBS_WEBHOOK_ALLOW_PRIVATE`` (read by the services, handed here as ``GuardPolicy``) lists
networks to let through anyway, for tests and private deployments; ``*`` lets everything
through. ``http://`` is refused unless the policy allows it.
"""

from __future__ import annotations

import ipaddress
import socket
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from yarl import URL

from ujobs.errors import ConfigInvalidError
from ujobs.webhooks.errors import WebhookEndpointInvalidError

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
MAX_URL_LENGTH = 2048
LOOPBACK_NAME_ADDRESSES = (ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("::1"))


@dataclass(frozen=True, slots=True)
class GuardPolicy:
    """What the guard lets through beyond public addresses over https."""

    allow_http: bool = False
    allow_networks: tuple[IPNetwork, ...] = field(default=())

    @classmethod
    def parse(cls, allow_private: str | None, *, allow_http: bool = False) -> GuardPolicy:
        """From ``UJOBS_WEBHOOK_ALLOW_PRIVATE``: empty, ``*``, or comma-separated networks."""
        text = (allow_private or "").strip()
        if not text:
            return cls(allow_http=allow_http)
        if text == "*":
            return cls(
                allow_http=allow_http,
                allow_networks=(
                    ipaddress.ip_network("0.0.0.0/0"),
                    ipaddress.ip_network("::/0"),
                ),
            )
        networks: list[IPNetwork] = []
        for part in text.split(","):
            item = part.strip()
            if not item:
                continue
            try:
                networks.append(ipaddress.ip_network(item, strict=False))
            except ValueError:
                raise ConfigInvalidError(
                    f"UJOBS_WEBHOOK_ALLOW_PRIVATE: {item!r} is not a network (write e.g. "
                    "'127.0.0.1/32,10.0.0.0/8', or '*' for every address)",
                    meta={"variable": "UJOBS_WEBHOOK_ALLOW_PRIVATE"},
                ) from None
        return cls(allow_http=allow_http, allow_networks=tuple(networks))


def refused_reason(address: IPAddress, policy: GuardPolicy) -> str | None:
    """Why ``address`` may not be connected to, or None when it may."""
    if any(address in net for net in policy.allow_networks if net.version == address.version):
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return refused_reason(address.ipv4_mapped, policy)
    if address.is_multicast:
        return "multicast"
    if address.is_loopback:
        return "loopback"
    if address.is_link_local:
        return "link-local"
    if address.is_unspecified:
        return "unspecified"
    if not address.is_global:
        return "private"
    return None


def refusal_error(host: str, address: str, why: str) -> WebhookEndpointInvalidError:
    return WebhookEndpointInvalidError(
        f"the endpoint's host {host!r} resolves to {'an' if why[0] in 'aeiou' else 'a'} {why} "
        f"address ({address}); webhooks only "
        "reach public addresses (UJOBS_WEBHOOK_ALLOW_PRIVATE lists exceptions)",
        meta={"host": host, "address": address, "reason": why},
    )


def check_url(url: str, policy: GuardPolicy) -> str:
    """The URL's host, or ``X_WEBHOOK_ENDPOINT_INVALID`` for a URL no delivery may use: not
    http(s), ``http://`` where not allowed, credentials in it, no host, or a host naming
    without DNS (``host_addresses``) only addresses the policy refuses."""
    if not isinstance(url, str) or not url or len(url) > MAX_URL_LENGTH:
        raise WebhookEndpointInvalidError(
            f"an endpoint URL is a string of at most {MAX_URL_LENGTH} characters"
        )
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise WebhookEndpointInvalidError(
            "the endpoint URL does not parse", meta={"reason": "malformed"}
        ) from None
    if parts.scheme not in ("https", "http"):
        raise WebhookEndpointInvalidError(
            f"an endpoint URL is https:// (got {parts.scheme or 'no'} scheme)",
            meta={"reason": "scheme"},
        )
    if parts.scheme == "http" and not policy.allow_http:
        raise WebhookEndpointInvalidError(
            "an endpoint URL must be https:// (set UJOBS_WEBHOOK_ALLOW_HTTP=1 to allow http)",
            meta={"reason": "scheme"},
        )
    if parts.username is not None or parts.password is not None:
        raise WebhookEndpointInvalidError(
            "an endpoint URL must not carry credentials; put them in the endpoint's headers",
            meta={"reason": "credentials"},
        )
    host = _client_host(url)
    if not host or port == 0:
        raise WebhookEndpointInvalidError(
            "the endpoint URL names no host", meta={"reason": "malformed"}
        )
    # Like the resolver: refused when no address of the host is allowed.
    named = host_addresses(host)
    refusals = [(str(a), why) for a in named if (why := refused_reason(a, policy)) is not None]
    if named and len(refusals) == len(named):
        raise refusal_error(host, *refusals[0])
    return host


def _client_host(url: str) -> str | None:
    """The host the HTTP client connects to (yarl's reading: IDNA-folded, so full-width
    digits are ASCII ones), lower case."""
    try:
        host = URL(url).raw_host
    except (ValueError, UnicodeError):
        raise WebhookEndpointInvalidError(
            "the endpoint URL's host does not parse", meta={"reason": "malformed"}
        ) from None
    return host.lower() if host else None


def host_addresses(host: str) -> tuple[IPAddress, ...]:
    """The addresses ``host`` names without asking DNS: an IP literal in any spelling a
    resolver accepts (``inet_aton``'s hex, octal and short forms, a trailing dot), the
    loopback pair for ``localhost`` and ``*.localhost``; empty for a name DNS answers."""
    bare = host[:-1] if host.endswith(".") else host
    if bare == "localhost" or bare.endswith(".localhost"):
        return LOOPBACK_NAME_ADDRESSES
    try:
        return (ipaddress.ip_address(bare),)
    except ValueError:
        pass
    try:
        return (ipaddress.IPv4Address(socket.inet_aton(bare)),)
    except (OSError, ValueError):
        return ()
