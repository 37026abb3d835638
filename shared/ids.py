"""Job and run ids: UUIDv7 (RFC 9562), minted in Python.

Time-ordered ids keep the primary-key index append-mostly (a random UUIDv4 touches a random leaf
page on every insert), and minting in Python lets an outbox stage a row under the job's real id
before the job exists.
"""

from __future__ import annotations

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
