"""``claim_slots.sql`` is ``claim.sql`` plus the fleet slots the claim takes (the ``kept``,
``deferred``, ``wanted``, ``open``, ``slotted`` and ``held`` CTEs, the rows ``kept`` read where
claim.sql reads ``picked``, and the ``slot`` column joined from ``held``), kept as
a whole file so each stays a statement a person can read and run, and so the plain claim of
every worker without ``concurrency`` jobs pays nothing for the slots. This holds the pair to
that: with those parts taken out, the two statements are the same text, so a change to the
claim cannot land in one file and miss its twin."""

from __future__ import annotations

import re

from ujobs.drivers.postgres.sql import query

SLOT_CTES = ("kept", "deferred", "wanted", "open", "slotted", "held")


def statement_core(text: str) -> str:
    start = re.search(r"(?m)^with recursive ", text)  # the header comments differ by design
    assert start is not None, "no statement after the header"
    return text[start.start() :]


def test_claim_slots_is_the_claim_plus_the_slot_ctes() -> None:
    plain, variant = statement_core(query("claim")), statement_core(query("claim_slots"))
    for name in SLOT_CTES:
        assert f"\n{name} as (" in variant
        variant = re.sub(rf"\n{name} as \(\n.*?\n\),(?=\n)", "", variant, count=1, flags=re.S)
    variant = variant.replace(
        " kept p", " picked p"
    )  # the rows `kept` leaves, where claim.sql reads `picked`
    variant = variant.replace(", h.key as slot\n", "\n")
    variant = variant.replace("  left join held h on h.id = x.id and x.kind = 'claimed'\n", "")
    assert variant == plain


def test_the_plain_claim_takes_no_slot() -> None:
    assert "x_job_leases" not in statement_core(query("claim"))
    assert "$13" not in query("claim")
