"""Keep secrets out of every line a service prints.

A connection URL carries its password (``postgresql://app:s3cret@db/app``), and a URL ends up
in error messages (asyncpg's, redis-py's), in a config dump at start, in a log field. Rather
than trusting every call site to remember, the log formatter and the CLI's error printer pass
every string through ``redact_text``: the password part of any ``scheme://user:password@``
and any ``password=`` / ``token=`` / ``secret=`` query or keyword value becomes ``***``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit, urlunsplit

MASK = "***"

# scheme://user:password@host — the password is everything between the first ':' after the
# user and the LAST '@' before the host (passwords may contain '@' when not percent-encoded).
_URL_PASSWORD = re.compile(r"(?P<head>[a-zA-Z][a-zA-Z0-9+.\-]*://[^:/@\s'\"]*:)[^\s'\"/]+(?=@)")
# password=…, token=…, secret=… in a query string, a DSN's keywords or a message.
_KEYWORD = re.compile(
    r"(?P<head>\b(?:password|passwd|pwd|token|secret|api_key|apikey)\s*[=:]\s*)"
    r"(?P<value>\"[^\"]*\"|'[^']*'|[^\s&;,'\"]+)",
    re.IGNORECASE,
)


def redact_url(url: str) -> str:
    """``url`` with its password (and any secret query value) replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return redact_text(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        user, colon, password = userinfo.partition(":")
        if colon and password:
            netloc = f"{user}:{MASK}@{host}"
    query = _KEYWORD.sub(lambda m: f"{m['head']}{MASK}", parts.query)
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def redact_text(text: str) -> str:
    """Every URL password and every ``password=``-style value in free text, masked."""
    if not text:
        return text
    text = _URL_PASSWORD.sub(lambda m: f"{m['head']}{MASK}", text)
    return _KEYWORD.sub(lambda m: f"{m['head']}{MASK}", text)


def redact_value(value: Any) -> Any:
    """``redact_text`` over every string inside a JSON-like value (dicts, lists, tuples)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, Mapping):
        return {k: redact_value(v) for k, v in value.items()}
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return [redact_value(v) for v in value]
    return value
