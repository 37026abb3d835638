"""Hypothesis fuzz of the HTTP enqueue and event routes of a live ``ujobs api`` with VALID tokens
and hostile bodies (``tests/chaos/hostile.py``: the NATS fuzz's, sized to this api's body cap
``MAX_BODY`` and a little past it), after tenant A planted its work (``tests/chaos/tenants.py``).
``test_fuzz_http.py`` sweeps fixed bad input over every route; schemathesis fuzzes the
documented shapes; this one searches the depths, sizes, encodings and lengths a schema does
not say.

Property, for ``POST /v1/jobs/fuzz.open``, its ``/batch`` and ``POST /v1/events/{name}``, with
tenant B's token and an operator's: no 5xx, an error is ``{"error": {"code": "X_…"}}`` and
never ``X_INTERNAL``, and no answer to B holds a string of A's that B did not send.

Budget (CI, 2 cores): ``EXAMPLES`` examples, no shrinking (findings listed by kind), a fixed
derandomized seed: about 15 s, under a 180 s timeout."""

from __future__ import annotations

import asyncio
from collections import Counter

import aiohttp
import orjson
import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from tests.chaos import hostile
from tests.chaos.tenants import Planted, plant
from tests.e2e.live_api import live_api
from ujobs.webhooks.store_pg import new_secret_key

pytestmark = pytest.mark.chaos

APP = "tests.chaos.fuzz_app:api"
EXAMPLES = 200
MAX_BODY = 65_536
"""``UJOBS_API_MAX_BODY_BYTES`` of the fuzzed api: small, so bodies near and past it are cheap."""
EVENT = "fuzz.hostile"


def _cases(planted: Planted) -> st.SearchStrategy[tuple[str, str, hostile.Hostile]]:
    tenant_b = hostile.enqueues(planted.tenant_b, cap=MAX_BODY, over=256, long_tenant=False)
    operator = hostile.enqueues(planted.tenant_b, cap=MAX_BODY, over=256, long_tenant=True)
    events = hostile.events(cap=MAX_BODY, over=256)
    return st.one_of(
        st.tuples(st.just("tenant"), st.sampled_from(["enqueue", "batch"]), tenant_b),
        st.tuples(st.just("operator"), st.sampled_from(["enqueue", "batch"]), operator),
        st.tuples(st.sampled_from(["tenant", "operator"]), st.just("event"), events),
    )


class Fuzz:
    def __init__(self, url: str, planted: Planted, operator: str) -> None:
        self.url = url
        self.planted = planted
        self.tokens = {"tenant": planted.token_b, "operator": operator}
        self.tried: Counter[str] = Counter()
        self.bad: list[str] = []

    async def post(
        self, http: aiohttp.ClientSession, who: str, route: str, case: hostile.Hostile
    ) -> None:
        if route == "event":
            path, body = f"/v1/events/{EVENT}", case.body
        elif route == "batch":
            path, body = f"/v1/jobs/{hostile.JOB}/batch", case.batch() or case.body
        else:
            path, body = f"/v1/jobs/{hostile.JOB}", case.body
        label = f"{who} {route} {case.label}"
        self.tried[case.kind.split(" ")[0]] += 1
        headers = {
            "Authorization": f"Bearer {self.tokens[who]}",
            "Content-Type": "application/json",
        }
        async with http.post(f"{self.url}{path}", data=body, headers=headers) as reply:
            raw = await reply.read()
            status = reply.status
        if status >= 500:
            self.bad.append(f"{status} {_code(raw)}: {label}: {raw[:160]!r}")
        elif status >= 400:
            code = _code(raw)
            if code is None or not code.startswith("X_") or code == "X_INTERNAL":
                self.bad.append(f"{status} {code}: {label}: {raw[:160]!r}")
        if who == "tenant" and (leaked := self.planted.leaks(raw, body)):
            self.bad.append(f"answer to B holds A's {leaked}: {label}")


def _code(raw: bytes) -> str | None:
    try:
        code = orjson.loads(raw)["error"]["code"]
    except (orjson.JSONDecodeError, KeyError, TypeError):
        return None
    return code if isinstance(code, str) else None


@pytest.mark.timeout(180)
def test_hostile_bodies_with_valid_tokens_are_never_a_5xx(pg_dsn: str) -> None:
    env = {"UJOBS_API_MAX_BODY_BYTES": str(MAX_BODY), "UJOBS_SECRET_KEY": new_secret_key()}
    with live_api(pg_dsn, app=APP, **env) as api:
        loop = asyncio.new_event_loop()
        try:
            planted = loop.run_until_complete(plant(api.url, pg_dsn))
            fuzz = Fuzz(api.url, planted, api.token)
            http = loop.run_until_complete(_session())

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                derandomize=True,
                database=None,
                phases=[Phase.explicit, Phase.generate],
                suppress_health_check=list(HealthCheck),
            )
            @given(case=_cases(planted))
            @hostile.tried_first(
                hostile.landmarks(planted.tenant_b, cap=MAX_BODY, routes=("enqueue", "batch"))
            )
            def fuzzed(case: tuple[str, str, hostile.Hostile]) -> None:
                loop.run_until_complete(fuzz.post(http, *case))

            try:
                fuzzed()
            finally:
                loop.run_until_complete(http.close())
        finally:
            loop.close()
    print(f"http hostile fuzz: {EXAMPLES} examples, kinds {dict(fuzz.tried)}")
    assert fuzz.bad == [], hostile.summary(fuzz.bad)


async def _session() -> aiohttp.ClientSession:
    return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30))
