"""What an api process keeps of a token between requests: only what can never change.

A token's id, tenant, scopes and expiry are fixed when it is minted (``ujobs tokens`` has no
edit); the one fact that moves is its revocation. So the single-enqueue route takes the fixed
facts from here and leaves revocation to the enqueue's own statement
(``sql/queries/enqueue_insert_live.sql``; ``enqueue_many_live.sql`` for a coalesced group): a revoke
still holds from the next request, in every api process, with no restart and no invalidation
message, and the common request makes one round trip instead of a lookup and then an insert.

Expiry is a fixed instant, so it is checked here against the clock (and again in the
statement). The cache is keyed by the secret's SHA-256, as the table is, so no secret is kept;
an unknown secret is never cached (a stream of made-up tokens cannot fill it); a token found
dead by a statement is forgotten, so its next request reads the table and says why.
"""

from __future__ import annotations

from ujobs.services.api.tokens import TokenRecord, hash_token

MAX_KNOWN_TOKENS = 10_000
"""Past this many tokens the oldest remembered one is dropped (it is read again on its next
request): a bound on memory whatever the number of tokens a deployment mints."""


class KnownTokens:
    """Secret hash -> the token's fixed facts, for tokens this process found live."""

    def __init__(self, max_size: int = MAX_KNOWN_TOKENS) -> None:
        self.max_size = max_size
        self._by_hash: dict[bytes, TokenRecord] = {}

    def __len__(self) -> int:
        return len(self._by_hash)

    def get(self, secret: str) -> TokenRecord | None:
        return self._by_hash.get(hash_token(secret))

    def remember(self, secret: str, record: TokenRecord) -> None:
        """Keep ``record``'s fixed facts (a revoked one is never kept)."""
        if record.revoked_at_ms is not None:
            return
        if len(self._by_hash) >= self.max_size:
            del self._by_hash[next(iter(self._by_hash))]
        self._by_hash[hash_token(secret)] = record

    def forget(self, secret: str) -> None:
        self._by_hash.pop(hash_token(secret), None)


__all__ = ["MAX_KNOWN_TOKENS", "KnownTokens"]
