"""The SSRF guard: private, loopback, link-local, multicast and metadata addresses are refused
at connect time, on the addresses the socket would use; http:// only where allowed."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from aiohttp.abc import AbstractResolver, ResolveResult

from tests.support.webhook_receiver import Receiver
from ujobs.errors import ConfigInvalidError
from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.errors import WebhookEndpointInvalidError
from ujobs.webhooks.ssrf import GuardPolicy, check_url, refused_reason

STRICT = GuardPolicy(allow_http=True)


class StaticResolver(AbstractResolver):
    """Answers fixed addresses per host, and counts the lookups (a rebinding DNS server)."""

    def __init__(self, table: dict[str, list[str]]) -> None:
        self.table = table
        self.lookups = 0

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        self.lookups += 1
        out: list[ResolveResult] = []
        for address in self.table.get(host, []):
            ip = ipaddress.ip_address(address)
            out.append(
                {
                    "hostname": host,
                    "host": address,
                    "port": port,
                    "family": socket.AF_INET if ip.version == 4 else socket.AF_INET6,
                    "proto": 0,
                    "flags": socket.AI_NUMERICHOST,
                }
            )
        if not out:
            raise OSError(f"no address for {host}")
        return out

    async def close(self) -> None:
        return None


@pytest.mark.parametrize(
    ("address", "why"),
    [
        ("127.0.0.1", "loopback"),
        ("10.1.2.3", "private"),
        ("172.16.0.1", "private"),
        ("192.168.1.1", "private"),
        ("169.254.169.254", "link-local"),  # the cloud metadata service
        ("100.100.100.200", "private"),  # shared address space (one cloud's metadata)
        ("224.0.0.1", "multicast"),
        ("0.0.0.0", "unspecified"),
        ("::1", "loopback"),
        ("fe80::1", "link-local"),
        ("fd00:ec2::254", "private"),  # a cloud's IPv6 metadata address
        ("ff02::1", "multicast"),
        ("::ffff:127.0.0.1", "loopback"),
        ("8.8.8.8", None),
        ("2606:4700:4700::1111", None),
    ],
)
def test_which_addresses_are_refused(address: str, why: str | None) -> None:
    assert refused_reason(ipaddress.ip_address(address), GuardPolicy()) == why


def test_the_allow_list_lets_named_networks_through() -> None:
    policy = GuardPolicy.parse("127.0.0.1/32, 10.0.0.0/8")
    assert refused_reason(ipaddress.ip_address("127.0.0.1"), policy) is None
    assert refused_reason(ipaddress.ip_address("10.9.9.9"), policy) is None
    assert refused_reason(ipaddress.ip_address("192.168.0.1"), policy) == "private"
    everything = GuardPolicy.parse("*")
    assert refused_reason(ipaddress.ip_address("169.254.169.254"), everything) is None
    with pytest.raises(ConfigInvalidError) as bad:
        GuardPolicy.parse("10.0.0.0/8,not-a-net")
    assert bad.value.meta == {"variable": "UJOBS_WEBHOOK_ALLOW_PRIVATE"}


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://partner.example/hook", "scheme"),
        ("ftp://partner.example/hook", "scheme"),
        ("https://user:pw@partner.example/hook", "credentials"),
        ("https:///hook", "malformed"),
        ("https://127.0.0.1/hook", "loopback"),
        ("https://[::1]:8443/hook", "loopback"),
        ("https://169.254.169.254/latest/meta-data", "link-local"),
    ],
)
def test_check_url_refuses_what_no_delivery_may_use(url: str, reason: str) -> None:
    with pytest.raises(WebhookEndpointInvalidError) as exc:
        check_url(url, GuardPolicy())
    assert exc.value.meta["reason"] == reason


def test_check_url_passes_a_public_https_url_and_http_where_allowed() -> None:
    assert check_url("https://partner.example:8443/hook", GuardPolicy()) == "partner.example"
    assert check_url("http://partner.example/hook", STRICT) == "partner.example"


NON_CANONICAL_LOOPBACK = [
    "http://0x7f.1/hook",
    "http://2130706433/hook",
    "http://0177.0.0.1/hook",
    "http://127.1/hook",
    "http://localhost/hook",
    "http://LocalHost./hook",
    "http://api.localhost/hook",
    "http://127.0.0.1./hook",
    "http://[::ffff:127.0.0.1]/hook",
    "http://\uff11\uff12\uff17.0.0.1/hook",  # full-width digits: the client folds them to ASCII
]


@pytest.mark.parametrize("url", NON_CANONICAL_LOOPBACK)
async def test_a_loopback_host_in_any_spelling_is_refused_with_the_delivery_message(
    url: str,
) -> None:
    """Registration (``check_url``) refuses what a delivery would, with the delivery's own
    error: one rule in both places, whatever spelling the resolver or the client accepts."""
    with pytest.raises(WebhookEndpointInvalidError) as registered:
        check_url(url, STRICT)
    assert registered.value.meta["reason"] == "loopback"
    client = WebhookClient(STRICT)
    try:
        with pytest.raises(WebhookEndpointInvalidError) as delivered:
            await client.post(url, b"{}", {}, timeout_s=5)
    finally:
        await client.close()
    assert delivered.value.to_dict() == registered.value.to_dict()


def test_an_allowed_network_lets_its_names_and_spellings_through() -> None:
    local = GuardPolicy.parse("127.0.0.1/32", allow_http=True)
    assert check_url("http://localhost:8080/hook", local) == "localhost"
    assert check_url("http://0x7f.1/hook", local) == "0x7f.1"
    assert check_url("https://0x08080808/hook", GuardPolicy()) == "0x08080808"  # 8.8.8.8
    assert check_url("https://partner.example./hook", GuardPolicy()) == "partner.example."
    with pytest.raises(WebhookEndpointInvalidError) as exc:
        check_url("http://0/hook", local)
    assert exc.value.meta["reason"] == "unspecified"


async def test_a_name_resolving_to_loopback_is_refused_at_connect(receiver: Receiver) -> None:
    dns = StaticResolver({"partner.example": ["127.0.0.1"]})
    url = f"http://partner.example:{receiver.port}/hook"
    check_url(url, STRICT)  # nothing in the URL says loopback: only its answer does
    client = WebhookClient(STRICT, resolver=dns)
    try:
        with pytest.raises(WebhookEndpointInvalidError) as exc:
            await client.post(url, b"{}", {}, timeout_s=5)
    finally:
        await client.close()
    assert exc.value.meta["reason"] == "loopback"
    assert receiver.requests == []


async def test_dns_rebinding_is_caught_where_the_socket_connects(receiver: Receiver) -> None:
    # The name passes every check made on the URL; only its answer at connect time is private.
    dns = StaticResolver({"partner.example": ["10.0.0.7", "127.0.0.1"]})
    url = f"http://partner.example:{receiver.port}/hook"
    check_url(url, STRICT)
    client = WebhookClient(STRICT, resolver=dns)
    try:
        with pytest.raises(WebhookEndpointInvalidError) as exc:
            await client.post(url, b"{}", {}, timeout_s=5)
    finally:
        await client.close()
    assert exc.value.meta["reason"] == "private"
    assert dns.lookups == 1
    assert receiver.requests == []


async def test_only_allowed_addresses_of_an_answer_are_connected_to(receiver: Receiver) -> None:
    dns = StaticResolver({"partner.example": ["10.0.0.7", "127.0.0.1"]})
    policy = GuardPolicy.parse("127.0.0.1/32", allow_http=True)
    client = WebhookClient(policy, resolver=dns)
    try:
        answer = await client.post(
            f"http://partner.example:{receiver.port}/hook", b"{}", {}, timeout_s=5
        )
    finally:
        await client.close()
    assert answer.status == 204
    assert len(receiver.requests) == 1


async def test_a_refused_connect_is_a_counted_terminal_failure_in_the_family(
    receiver: Receiver,
) -> None:
    from tests.webhooks.kit import make_kit

    kit = make_kit(policy=STRICT)
    try:
        kit.add_endpoint(f"http://localhost:{receiver.port}/hook")
        kit.add_event()
        await kit.enqueue()
        execution = await kit.attempt()
    finally:
        await kit.client.close()
    assert (execution.outcome, execution.code) == ("dead-lettered", "X_WEBHOOK_ENDPOINT_INVALID")
    assert [(a.outcome, a.code) for a in kit.ledger.attempts] == [
        ("failed", "X_WEBHOOK_ENDPOINT_INVALID")
    ]
    assert receiver.requests == []


async def test_a_url_the_client_passed_is_parsed_once_and_a_refused_one_every_time(
    receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The client remembers the URLs ``check_url`` passed under its (fixed) policy; a refusal
    is never remembered, so a refused URL is refused, with its reason, on every POST."""
    import ujobs.webhooks.client as client_module

    checks: list[str] = []

    def counted(url: str, policy: GuardPolicy) -> str:
        checks.append(url)
        return check_url(url, policy)

    monkeypatch.setattr(client_module, "check_url", counted)
    url = f"http://127.0.0.1:{receiver.port}/hook"
    allowed = WebhookClient(GuardPolicy.parse("127.0.0.1/32", allow_http=True))
    strict = WebhookClient(STRICT)
    try:
        for _ in range(3):
            assert (await allowed.post(url, b"{}", {}, timeout_s=5)).status == 204
        for _ in range(2):
            with pytest.raises(WebhookEndpointInvalidError) as refused:
                await strict.post(url, b"{}", {}, timeout_s=5)
            assert refused.value.meta["reason"] == "loopback"
    finally:
        await allowed.close()
        await strict.close()
    assert checks == [url, url, url]  # once for the allowed client, twice for the strict one
    assert len(receiver.requests) == 3
