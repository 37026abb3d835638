"""``settlements_ack.sql`` / ``settlements_nack.sql`` are ``ack.sql`` / ``nack.sql`` plus one
``x_settlements`` insert (the NATS edge's outbox), kept as whole files so each stays a
statement a person can read and run. This holds each pair to that: with the settlements
variant's ``outbox`` CTE taken out and both ``returning`` lines set aside, the two statements
are the same text, so a change to a settle cannot land in one file and miss its twin."""

from __future__ import annotations

import re

import pytest

from ujobs.drivers.postgres.sql import query


def statement_core(text: str) -> str:
    start = re.search(r"(?m)^with ", text)  # the header comments differ by design
    assert start is not None, "no statement after the header"
    body = text[start.start() :]
    body = re.sub(r",\noutbox as \(\n.*?\n\)(?=\nselect )", "", body, flags=re.S)
    return re.sub(r"(?m)^\s*returning .*$", "returning", body)


@pytest.mark.parametrize("name", ["ack", "nack"])
def test_the_settlements_variant_is_its_twin_plus_the_outbox_row(name: str) -> None:
    plain, variant = query(name), query(f"settlements_{name}")
    assert "outbox as (" in variant
    assert "x_settlements" in variant
    assert statement_core(variant) == statement_core(plain)
