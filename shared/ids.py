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
import struct
import threading
import time

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """A UUIDv7 string; ids minted in one process are strictly increasing."""
    return new_ids(1)[0]


def new_ids(count: int) -> list[str]:
    """``count`` UUIDv7 strings, exactly as ``count`` calls of ``new_id`` in a row would mint
    them (strictly increasing, after every id minted before), for one lock and one read of
    ``os.urandom``: a batch enqueue mints two ids a job, and the per-call costs were most of
    its id time."""
    if count <= 0:
        return []
    entropy = os.urandom(8 * count + 2)
    with _lock:
        prefixes = _stamps(count, entropy[-2:])
    return (_format_bulk if count >= _BULK else _format_each)(prefixes, entropy)


def _format_each(prefixes: list[int], entropy: bytes) -> list[str]:
    """Id ``i`` is ``prefixes[i]``, the variant, and 62 bits of ``entropy[8i : 8i + 8]``."""
    ids: list[str] = []
    for index, prefix in enumerate(prefixes):
        rand = int.from_bytes(entropy[8 * index : 8 * index + 8], "big") & _RAND_MASK
        # The canonical 8-4-4-4-12 form, formatted directly (uuid.UUID() is 3x slower).
        h = ((prefix << 64) | _VARIANT | rand).to_bytes(16, "big").hex()
        ids.append(f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}")
    return ids


def _format_bulk(prefixes: list[int], entropy: bytes) -> list[str]:
    """The same ids as ``_format_each``, laid out as one text: each id's sixteen bytes side
    by side (its prefix, then eight bytes of ``entropy`` with the variant), hex-encoded in
    one call, each hex column of every id copied to its place in that id's 8-4-4-4-12 form
    by one slice assignment, and the text split into the ids in C: a handful of C calls per
    column of the form and one string per id, where the per-id integer and f-string work
    cost several times as much for a batch of hundreds."""
    count = len(prefixes)
    raw = bytearray(16 * count)
    high = struct.pack(f">{count}Q", *prefixes)  # ms (6 bytes), version + counter (2)
    for column in range(8):
        raw[column::16] = high[column::8]
        raw[8 + column :: 16] = entropy[column : 8 * count : 8]
    raw[8::16] = raw[8::16].translate(_VARIANT_BYTE)  # the variant: 10xxxxxx
    hexed = raw.hex().encode()
    text = bytearray(b"-" * (_SLOT * count))
    for column, at in enumerate(_HEX_AT):
        text[at::_SLOT] = hexed[column::32]
    text[_SLOT - 1 :: _SLOT] = b" " * count
    return text[:-1].decode().split(" ")


_SLOT = 37
"""An id's 36 characters and the space after it, in ``_format_bulk``'s text."""
_HEX_AT = (*range(8), *range(9, 13), *range(14, 18), *range(19, 23), *range(24, 36))
"""Where each of an id's 32 hex digits stands in its 8-4-4-4-12 form."""
_BULK = 16
_VARIANT_BYTE = bytes((byte & 0x3F) | 0x80 for byte in range(256))
_RAND_MASK = 0x3FFF_FFFF_FFFF_FFFF
_VARIANT = 0b10 << 62


def _stamps(count: int, seed: bytes) -> list[int]:
    """The top 64 bits (48-bit ms, version 7, 12-bit counter) of the next ``count`` ids.

    Called under ``_lock``. A millisecond not seen before starts its counter at a random
    value below 1024 (room for 3072 more in that millisecond); the same or an earlier
    millisecond (a clock step back) continues the last counter, and a full counter borrows
    the next millisecond, so order never depends on the wall clock moving forward.
    """
    global _last_ms, _counter
    ms = time.time_ns() // 1_000_000
    if ms <= _last_ms:
        ms = _last_ms
        counter = _counter + 1
    else:
        counter = int.from_bytes(seed, "big") & 0x3FF
    # Within one millisecond consecutive ids' prefixes are consecutive integers: one range()
    # per millisecond the batch spans, not a Python step per id.
    prefixes: list[int] = []
    while count:
        if counter > 0xFFF:
            ms += 1
            counter = 0
        take = min(count, 0x1000 - counter)
        first = (((ms & 0xFFFF_FFFF_FFFF) << 16) | 0x7000) + counter
        prefixes.extend(range(first, first + take))
        counter += take
        count -= take
    _last_ms = ms
    _counter = counter - 1
    return prefixes


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
    h = value.to_bytes(16, "big").hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
