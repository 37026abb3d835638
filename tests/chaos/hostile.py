"""Hostile bodies, as hypothesis strategies: one source for the edge fuzzers
(``test_fuzz_hostile_nats.py``, ``test_fuzz_hostile_http.py``) and the storm's hostile
participant (``participants/hostile.py``).

Each body is an enqueue of ``fuzz.open`` (``tests/chaos/fuzz_app.py``: its ``data`` takes any
JSON and its idempotency key is the caller's ``key``), or an event's ``{"payload"}``, made
hostile one way at a time, so a finding names its kind:

* ``deep``: ``data`` (or the payload) nested 1 to 4,000 levels, lists, objects or both — past
  the parser's limit (about 1,024) and between pydantic's serializer limit (255) and it;
* ``large``: a string padding the body to just under (or just over) the edge's size cap;
* ``encoding``: invalid UTF-8 bytes, an encoded surrogate, a lone surrogate escape or a NUL
  (escaped or raw) in one of the strings;
* ``types``: a field of the wrong type, or a body that is any JSON at all;
* ``number``: huge integers (up to thousands of digits), ``1e999``, ``-1e309``;
* ``long``: a tenant, queue, idempotency key or ``runId`` of 200 to 6,000 characters that do
  not compress (Postgres compresses a repeated string under its index limit);
* ``valid``: a good enqueue with small random ``data`` (the success path, between the others).

``org`` is the tenant the body acts for: the token's own, so a hostile body gets past tenancy
to the parser, the validator, the serializer and the statement.
"""

from __future__ import annotations

import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
from hypothesis import example
from hypothesis import strategies as st

JOB = "fuzz.open"
"""The job every hostile enqueue names (the storm's own is ``storm.hostile``)."""

INVALID_BYTES = (b"\xff", b"\xfe\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80")
"""Not UTF-8: a stray byte, a BOM of the wrong width, a broken pair, an encoded surrogate, a
code point past U+10FFFF, a lone continuation byte."""
ESCAPES = (b"\\ud800", b"\\udfff", b"\\udbff\\u0041", b"\\u0000", b"\x00")
"""Lone surrogates and NULs as JSON escapes, and one raw NUL byte (not valid JSON)."""
NUMBERS = (b"1e999", b"-1e309", b"1e-999", b"18446744073709551616", b"-9223372036854775809")
LONG_FIELDS = ("org_id", "key", "queue", "runId")
"""``org_id`` is the tenant (``fuzz.open``'s ``tenant=`` reads it), ``key`` its idempotency key."""
ALPHABET = string.ascii_letters + string.digits + "éü💥-_.:"


@dataclass(frozen=True)
class Hostile:
    """One hostile body: its kind (a finding's label) and its bytes."""

    kind: str
    body: bytes
    input: bytes | None = None
    """The raw ``input`` object alone, when the body is ``{"input": ...}`` and nothing else:
    what a batch's ``{"inputs": [...]}`` carries."""

    def batch(self) -> bytes | None:
        return None if self.input is None else b'{"inputs": [' + self.input + b"]}"

    @property
    def label(self) -> str:
        return f"{self.kind} ({len(self.body)} bytes)"


def deep(depth: int, shape: str = "list") -> bytes:
    """A JSON value nested ``depth`` levels (built as bytes: a serializer refuses to write it)."""
    if shape == "list":
        return b"[" * depth + b"1" + b"]" * depth
    if shape == "object":
        return b'{"a":' * depth + b"1" + b"}" * depth
    half = depth // 2
    return b'{"a":[' * half + b"1" + b"]}" * half


def incompressible(seed: int, length: int) -> str:
    """``length`` characters no compressor shrinks much (a fixed seed: reproducible)."""
    return "".join(random.Random(seed).choices(ALPHABET, k=length))


def input_body(org: str, key: str, data: bytes) -> bytes:
    """``{"org_id", "key", "data"}`` with ``data`` spliced in raw."""
    return (
        b'{"org_id": '
        + orjson.dumps(org)
        + b', "key": '
        + orjson.dumps(key)
        + b', "data": '
        + data
        + b"}"
    )


def enqueue_body(org: str, key: str, data: bytes, **options: Any) -> bytes:
    """``{"input": {"org_id", "key", "data"}, **options}``."""
    tail = b"".join(b", " + orjson.dumps(k) + b": " + orjson.dumps(v) for k, v in options.items())
    return b'{"input": ' + input_body(org, key, data) + tail + b"}"


def enqueue(kind: str, org: str, key: str, data: bytes, **options: Any) -> Hostile:
    body = enqueue_body(org, key, data, **options)
    return Hostile(kind, body, None if options else input_body(org, key, data))


def _spliced(kind: str, body: bytes) -> Hostile:
    """A body whose bytes were edited after it was built (its input is what follows
    ``{"input": `` up to the last brace, when no option follows it)."""
    head = b'{"input": '
    options = any(f'"{name}"'.encode() in body for name in ("runId", "queue"))
    return Hostile(kind, body, None if options else body[len(head) : -1])


def event_body(data: bytes) -> bytes:
    return b'{"payload": ' + data + b"}"


_KEYS = st.integers(min_value=0, max_value=10**9).map(lambda n: f"fuzz-{n}")
_JSON_LEAVES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=20),
)
SMALL_JSON = st.recursive(
    _JSON_LEAVES,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


def _data(kind: str) -> st.SearchStrategy[tuple[str, bytes]]:
    """(kind, JSON bytes) for ``data`` / ``payload``."""
    depth = st.integers(min_value=1, max_value=4_000)
    shape = st.sampled_from(["list", "object", "mixed"])
    if kind == "deep":
        return st.builds(lambda d, s: (f"deep {s} {d}", deep(d, s)), depth, shape)
    if kind == "number":
        digits = st.integers(min_value=19, max_value=5_000).map(lambda n: b"9" * n)
        return st.one_of(st.sampled_from(NUMBERS), digits).map(lambda b: ("number", b))
    return SMALL_JSON.map(lambda v: ("valid", orjson.dumps(v)))


def _encoding_body(org: str, key: str, bad: bytes, where: str) -> bytes:
    if where == "data":
        return enqueue_body(org, key, b'"x' + bad + b'y"')
    if where == "key":
        raw = enqueue_body(org, "\x01", b"1")
        return raw.replace(b'"\\u0001"', b'"k' + bad + b'"')
    if where == "org_id":
        raw = enqueue_body("\x01", key, b"1")
        return raw.replace(b'"\\u0001"', b'"' + org.encode() + bad + b'"')
    raw = enqueue_body(org, key, b"1", **{where: "\x01"})
    return raw.replace(b'"\\u0001"', b'"r' + bad + b'"')


def _sizes(cap: int, over: int) -> st.SearchStrategy[int]:
    return st.integers(min_value=max(1, cap - 1_024), max_value=cap + over)


def enqueues(org: str, *, cap: int, over: int, long_tenant: bool) -> st.SearchStrategy[Hostile]:
    """Hostile enqueues of ``fuzz.open`` for ``org``; ``cap`` is the edge's size cap (a large
    body lands within 1 KiB under it, or up to ``over`` bytes past it); ``long_tenant``: the
    token may act for any tenant (an operator's), so a long ``org_id`` reaches the statement
    rather than the tenancy check."""
    fields = LONG_FIELDS if long_tenant else LONG_FIELDS[1:]

    def data_body(pair: tuple[str, bytes], key: str) -> Hostile:
        return enqueue(pair[0], org, key, pair[1])

    def large(size: int, key: str) -> Hostile:
        frame = len(enqueue_body(org, key, b'""'))
        return enqueue("large", org, key, b'"' + b"a" * max(0, size - frame) + b'"')

    def long(field: str, length: int, seed: int, key: str) -> Hostile:
        text = incompressible(seed, length)
        if field == "org_id":
            return enqueue("long org_id", text, key, b"1")
        if field == "key":
            return enqueue("long key", org, text, b"1")
        return enqueue(f"long {field}", org, key, b"1", **{field: text})

    def typed(field: str, value: Any, key: str) -> Hostile:
        good: dict[str, Any] = {"org_id": org, "key": key, "data": 1}
        if field in good:
            wrong = orjson.dumps({**good, field: value})
            return Hostile(f"types {field}", b'{"input": ' + wrong + b"}", wrong)
        return Hostile(f"types {field}", orjson.dumps({"input": good, field: value}))

    wrong = st.one_of(SMALL_JSON, st.just([]), st.just({}))
    return st.one_of(
        st.builds(data_body, _data("valid"), _KEYS),
        st.builds(data_body, _data("deep"), _KEYS),
        st.builds(data_body, _data("number"), _KEYS),
        st.builds(large, _sizes(cap, over), _KEYS),
        st.builds(
            lambda bad, where, key: _spliced(
                f"encoding {where}", _encoding_body(org, key, bad, where)
            ),
            st.sampled_from(INVALID_BYTES + ESCAPES),
            st.sampled_from(["data", "key", "org_id", "runId", "queue"]),
            _KEYS,
        ),
        st.builds(
            typed,
            st.sampled_from(["org_id", "key", "data", "runId", "queue", "delay", "input"]),
            wrong,
            _KEYS,
        ),
        SMALL_JSON.map(lambda v: Hostile("types body", orjson.dumps(v))),
        st.builds(
            long,
            st.sampled_from(fields),
            st.integers(min_value=200, max_value=6_000),
            st.integers(min_value=0, max_value=2**32),
            _KEYS,
        ),
    )


def events(*, cap: int, over: int) -> st.SearchStrategy[Hostile]:
    """Hostile ``{"payload"}`` bodies of an event."""

    def large(size: int) -> Hostile:
        frame = len(event_body(b'""'))
        return Hostile("large", event_body(b'"' + b"a" * max(0, size - frame) + b'"'))

    return st.one_of(
        _data("valid").map(lambda p: Hostile(p[0], event_body(p[1]))),
        _data("deep").map(lambda p: Hostile(p[0], event_body(p[1]))),
        _data("number").map(lambda p: Hostile(p[0], event_body(p[1]))),
        _sizes(cap, over).map(large),
        st.sampled_from(INVALID_BYTES + ESCAPES).map(
            lambda bad: Hostile("encoding payload", event_body(b'"x' + bad + b'y"'))
        ),
        SMALL_JSON.map(lambda v: Hostile("types body", orjson.dumps(v))),
    )


def landmark_enqueues(org: str, *, cap: int, long_tenant: bool) -> list[Hostile]:
    """The known hard cases, tried first on every run (hypothesis's explicit examples) before
    the search: the depths on each side of the serializer's (255) and the parser's (about
    1,024) limits, a tenant past Postgres's index entry (about 2,700 bytes), each bad encoding
    in ``data`` and in a ``runId``, a body just under the cap."""
    key = "landmark"
    depths = (254, 255, 300, 1_000, 1_100, 4_000)
    cases = [
        enqueue(f"deep {s} {d}", org, key, deep(d, s)) for d in depths for s in ("list", "object")
    ]
    cases += [enqueue("number", org, key, n) for n in (*NUMBERS, b"9" * 5_000)]
    for bad in INVALID_BYTES + ESCAPES:
        cases.append(_spliced("encoding data", _encoding_body(org, key, bad, "data")))
    cases += [_spliced("encoding runId", _encoding_body(org, key, b, "runId")) for b in ESCAPES]
    fields = LONG_FIELDS if long_tenant else LONG_FIELDS[1:]
    for field in fields:
        text = incompressible(3_000, 3_000)
        if field == "org_id":
            cases.append(enqueue("long org_id", text, key, b"1"))
        elif field == "key":
            cases.append(enqueue("long key", org, text, b"1"))
        else:
            cases.append(enqueue(f"long {field}", org, key, b"1", **{field: text}))
    frame = len(enqueue_body(org, key, b'""'))
    cases.append(enqueue("large", org, key, b'"' + b"a" * (cap - 64 - frame) + b'"'))
    return cases


def landmark_events() -> list[Hostile]:
    """An event's known hard cases: its payload nested on each side of both limits."""
    return [
        Hostile(f"deep {s} {d}", event_body(deep(d, s)))
        for d in (254, 255, 300, 1_000, 1_100)
        for s in ("list", "object")
    ]


Case = tuple[str, str, Hostile]
"""(who: ``tenant`` or ``operator``, route: ``enqueue``, ``batch`` or ``event``, body)."""


def landmarks(org: str, *, cap: int, routes: tuple[str, ...] = ("enqueue",)) -> list[Case]:
    """``landmark_enqueues`` on each enqueue route, under a tenant token (``org``'s) and an
    operator's (a long tenant too), and ``landmark_events`` under the operator's."""
    cases: list[Case] = []
    for route in routes:
        cases += [("tenant", route, h) for h in landmark_enqueues(org, cap=cap, long_tenant=False)]
        cases += [("operator", route, h) for h in landmark_enqueues(org, cap=cap, long_tenant=True)]
    return cases + [("operator", "event", h) for h in landmark_events()]


def tried_first(cases: list[Case]) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Every case as an explicit example of a ``@given(case=...)`` test."""

    def decorate(test: Callable[..., None]) -> Callable[..., None]:
        for case in cases:
            test = example(case=case)(test)
        return test

    return decorate


def summary(findings: list[str], *, sample: int = 40) -> str:
    """How many findings of each kind (the text before the first ``:``), then a sample."""
    kinds: dict[str, int] = {}
    for line in findings:
        kind = line.split(":", 1)[0]
        kinds[kind] = kinds.get(kind, 0) + 1
    ranked = sorted(kinds.items(), key=lambda item: -item[1])
    return "\n".join([f"{n} x {kind}" for kind, n in ranked] + findings[:sample])
