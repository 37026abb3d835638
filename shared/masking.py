"""How a redacted document masks a value: one mask, one rule for idempotency keys.

Its own module so the enqueue path (``ujobs.jobs.job``) masks a key the way ``ujobs.introspect``
does without importing the introspection stack."""

from __future__ import annotations

MASK = "[redacted]"


def redact_key(key: str) -> str:
    """An idempotency key as a redacted document shows it: masked whole (any part of it may
    be an input value, a leading constant included)."""
    return MASK if key else key
