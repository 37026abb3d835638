"""``claim_waits``: the jobs whose busy key waits, so a claim leaves their rows unclaimed when
the key has no room (``ClaimOptions.slots_wait``); a ``when_busy='fail'`` job is not among
them, since its rows must be handed out to be refused."""

from __future__ import annotations

from tests.support.worker import Gate, declare, registry_of
from ujobs.worker.concurrency import claim_slots, claim_waits


def test_plain_caps_and_waiting_keys_wait_and_failing_keys_do_not() -> None:
    cap = declare(Gate(), name="cap", concurrency=2)
    waits = declare(Gate(), name="waits", concurrency={"key": lambda i: i.account, "limit": 3})
    fails = declare(
        Gate(),
        name="fails",
        concurrency={"key": lambda i: i.account, "limit": 1, "when_busy": "fail"},
    )
    plain = declare(Gate(), name="plain")
    registry = registry_of(cap, waits, fails, plain)
    assert claim_waits(registry) == frozenset({"cap", "waits"})
    assert claim_slots(registry) == (("cap", 2), ("fails", 1), ("waits", 3))
