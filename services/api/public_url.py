"""Where the links the api hands out point: ``UJOBS_PUBLIC_URL``, the api as its users reach it.

A link the api answers (an export part's signed download) must name the api's real address,
not the one the request claims: the ``Host`` header is the client's to write, and a link built
from it points wherever the asker chose, for whoever reads the answer next (a cache, a proxy,
a ticket the answer is pasted into). So ``ujobs api`` builds its links from
``UJOBS_PUBLIC_URL`` only; without it, it makes none and says why (``X_CONFIG_INVALID`` naming
the variable), rather than guess. ``ujobs dev``, one machine with the browser on it, falls
back to the request's own origin.
"""

from __future__ import annotations

from aiohttp import web

from ujobs.services.api.common import CONFIG
from ujobs.services.config.parse import invalid

VARIABLE = "UJOBS_PUBLIC_URL"


def public_base(request: web.Request) -> str:
    """The base of the api's own links (``scheme://host[:port][/prefix]``, no trailing
    ``/``); ``X_CONFIG_INVALID`` when the api knows none."""
    config = request.app.get(CONFIG)
    if config is not None and config.public_url is not None:
        return config.public_url
    if config is not None and config.common.service == "dev":
        # ``ujobs dev``: one machine, the browser on it, so the request's host is the api's.
        return str(request.url.origin())
    raise invalid(
        VARIABLE,
        "unset, so this api makes no link to itself (a link is never built from the request's "
        "Host header); set it to the api's address as its users reach it, e.g. "
        "https://jobs.example.com",
    )


__all__ = ["VARIABLE", "public_base"]
