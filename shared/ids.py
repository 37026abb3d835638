"""Job and run ids: UUIDv7 (RFC 9562), minted in Python — and UUIDv8 ids DERIVED from a name.

Time-ordered ids keep the primary-key index append-mostly (a random UUIDv4 touches a random leaf
page on every insert), and minting in Python lets an outbox stage a row under the job's real id
before the job exists.

``derived_id`` answers the same id for the same parts, every time and in every process: the
scheduler names each job of an occurrence this way, so firing that occurrence again (a crash
between the enqueue and the watermark's move, two schedulers racing) meets the rows the first
fire made — every driver's enqueue inserts nothing under an id that already names a row.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """A UUIDv7 string; ids minted in one process are strictly increasing."""
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms <= _last_ms:
            # Same (or an earlier, after a clock step) millisecond: keep order with the counter.
            ms = _last_ms
            _counter += 1
            if _counter > 0xFFF:
                ms += 1
                _counter = 0
        else:
            _counter = int.from_bytes(os.urandom(2), "big") & 0x3FF
        _last_ms = ms
        counter = _counter
    rand = int.from_bytes(os.urandom(8), "big") & 0x3FFF_FFFF_FFFF_FFFF
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x7 << 76
    value |= counter << 64
    value |= 0b10 << 62
    value |= rand
    # The canonical 8-4-4-4-12 form, formatted directly (uuid.UUID() is 3x slower, and a
    # batch enqueue mints two ids per job).
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def derived_id(ms: int, *parts: str) -> str:
    """A UUIDv8 (RFC 9562 custom layout) that is a pure function of ``ms`` and ``parts``.

    The first 48 bits are ``ms`` (as in a UUIDv7, so the ids of one schedule sort by time and
    stay near the index's right edge); the other 74 free bits come from a SHA-256 of the
    parts, each length-prefixed so ``("ab", "c")`` and ``("a", "bc")`` differ.
    """
    digest = hashlib.sha256()
    for part in parts:
        raw = part.encode()
        digest.update(len(raw).to_bytes(4, "big"))
        digest.update(raw)
    tail = int.from_bytes(digest.digest()[:10], "big")  # 80 bits; 74 are used
    value = (ms & 0xFFFF_FFFF_FFFF) << 80
    value |= 0x8 << 76
    value |= ((tail >> 62) & 0xFFF) << 64
    value |= 0b10 << 62
    value |= tail & 0x3FFF_FFFF_FFFF_FFFF
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
