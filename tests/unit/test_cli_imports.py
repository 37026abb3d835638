"""What starting a ``ujobs`` command loads: the CLI's root imports no HTTP client and no NATS
client, so an operator command does not pay for the api's, the deliverer's or the NATS edge's
libraries (``ujobs nats status`` and the deliverer's first POST load them when they run)."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys

from ujobs.webhooks.client import WebhookClient
from ujobs.webhooks.resolver import GuardedResolver
from ujobs.webhooks.ssrf import GuardPolicy

PROBE = """
import json, sys
import ujobs.services.cli.app
import ujobs.webhooks.client
import ujobs.webhooks.ssrf
print(json.dumps(sorted(m for m in ("aiohttp", "nats") if m in sys.modules)))
"""


def test_the_cli_root_loads_neither_aiohttp_nor_nats() -> None:
    # A fresh interpreter: this test process has both loaded already.
    out = subprocess.run(
        [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120
    )
    assert json.loads(out.stdout) == []


def test_the_deliverers_client_still_guards_its_connections() -> None:
    """The resolver moved out of ``ssrf`` is still the one the client's connector uses."""

    async def opened() -> object:
        client = WebhookClient(GuardPolicy())
        try:
            session = client._open()
            return session.connector._resolver  # type: ignore[union-attr]
        finally:
            await client.close()

    assert isinstance(asyncio.run(opened()), GuardedResolver)
