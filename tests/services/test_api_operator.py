"""The operator routes: the same functions as ``ujobs jobs | queues | tasks``, redaction like
``ujobs jobs show``, keyset pages both ways, 409s of the moves, and tenancy (another tenant's
job is 404 and never listed; queues and tasks need an operator token)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api
from tests.support.cli import json_of, run_to, ujobs
from ujobs.clock import FrozenClock
from ujobs.drivers.base import ClaimOptions, EnqueueRequest, NackOptions
from ujobs.drivers.postgres import postgres_driver
from ujobs.execution.settle import last_error_text
from ujobs.introspect import inspect_job, inspect_queues
from ujobs.masking import MASK


@pytest.fixture
def clock() -> FrozenClock:
    return FrozenClock()


@pytest.fixture
async def api(
    aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any], clock: FrozenClock
) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool, clock=clock)


async def enqueue(api: Api, org: str, to: str, **extra: Any) -> str:
    token = await api.token("enqueue:*")
    status, body = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(org, to=to), **extra}
    )
    assert status == 202, body
    return str(body["id"])


async def test_show_redacts_the_input_like_jobs_show(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    operator = await api.token("read")
    status, body = await api.call("GET", f"/v1/jobs/{job_id}", operator)
    assert status == 200
    assert body == await inspect_job(postgres_driver(pg_pool), job_id)
    assert body["input"] == {"to": MASK, "subject": MASK, "org_id": MASK}
    assert body["inputRedacted"] is True
    assert body["steps"] == []
    assert "a@x.io" not in str(body["input"])
    assert body["idempotencyKey"] == MASK  # "mail:a@x.io:hi" would print the input's values
    assert "a@x.io" not in str(body)
    _, page = await api.call("GET", "/v1/jobs", operator)
    assert [job["idempotencyKey"] for job in page["jobs"]] == [MASK]


async def test_another_tenants_job_is_404_and_never_listed(api: Api) -> None:
    mine = await enqueue(api, ORG_A, "a@x.io")
    theirs = await enqueue(api, ORG_B, "b@x.io")
    token = await api.token("read", "operate", tenant=ORG_A)
    assert (await api.call("GET", f"/v1/jobs/{mine}", token))[0] == 200
    status, body = await api.call("GET", f"/v1/jobs/{theirs}", token)
    assert status == 404
    assert body["error"]["code"] == "X_JOB_NOT_FOUND"
    unknown = await api.call("GET", "/v1/jobs/no-such-id", token)
    assert unknown == (
        404,
        {
            "error": {
                **body["error"],
                "message": unknown[1]["error"]["message"],
                "meta": {"id": "no-such-id"},
            }
        },
    )
    for method, path in (
        ("POST", f"/v1/jobs/{theirs}/cancel"),
        ("POST", f"/v1/jobs/{theirs}/retry"),
        ("POST", f"/v1/jobs/{theirs}/promote"),
        ("DELETE", f"/v1/jobs/{theirs}"),
    ):
        status, body = await api.call(method, path, token)
        assert (status, body["error"]["code"]) == (404, "X_JOB_NOT_FOUND"), path
    [row] = [r for r in await api.jobs() if r["id"] == theirs]
    assert row["state"] == "ready"
    for query in ("", "?tenantId=" + ORG_B):
        status, page = await api.call("GET", "/v1/jobs" + query, token)
        assert status == 200
        assert [j["id"] for j in page["jobs"]] == [mine]
    operator = await api.token("read")
    everyone = await api.call("GET", "/v1/jobs", operator)
    assert {j["id"] for j in everyone[1]["jobs"]} == {mine, theirs}
    only_b = await api.call("GET", f"/v1/jobs?tenantId={ORG_B}", operator)
    assert [j["id"] for j in only_b[1]["jobs"]] == [theirs]


def traceback_error(message: str) -> str:
    """``last_error`` as a worker writes it for a body that raised: headline, verdict, stack."""
    try:
        raise ValueError(message)
    except ValueError as exc:
        return last_error_text(exc, "stop: terminal — dead-lettered on attempt 1 of 1")


async def test_a_tenant_token_reads_the_last_errors_code_and_message_never_its_stack(
    api: Api, pg_pool: Any, clock: FrozenClock
) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    text = traceback_error("the partner refused the card")
    assert "Traceback" in text
    assert __file__ in text  # the stack names the server's paths
    driver = postgres_driver(pg_pool, clock=clock)
    [claimed] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w1"))
    retry_at = clock.now_ms() + 60_000
    assert await driver.nack(job_id, claimed.ref, NackOptions(error=text, run_at_ms=retry_at))
    summary = (
        "ValueError: the partner refused the card\nstop: terminal — dead-lettered on attempt 1 of 1"
    )
    tenant = await api.token("read", "operate", tenant=ORG_A)
    _, shown = await api.call("GET", f"/v1/jobs/{job_id}", tenant)
    _, listed = await api.call("GET", "/v1/jobs", tenant)
    status, moved = await api.call("POST", f"/v1/jobs/{job_id}/promote", tenant)
    assert status == 200, moved
    for doc in (shown, listed["jobs"][0], moved):
        assert doc["lastError"] == summary
        assert "Traceback" not in str(doc)
        assert __file__ not in str(doc)
    operator = await api.token("read")
    _, detail = await api.call("GET", f"/v1/jobs/{job_id}", operator)
    _, listed = await api.call("GET", "/v1/jobs", operator)
    assert detail["lastError"] == listed["jobs"][0]["lastError"] == text


async def test_keyset_pages_both_ways(api: Api, clock: FrozenClock) -> None:
    ids = []
    for n in range(5):
        ids.append(await enqueue(api, ORG_A, f"{n}@x.io"))
        clock.advance(1)
    newest_first = ids[::-1]
    token = await api.token("read")
    seen: list[str] = []
    cursor: str | None = None
    pages = []
    while True:
        query = "?limit=2" + (f"&after={cursor}" if cursor else "")
        status, page = await api.call("GET", "/v1/jobs" + query, token)
        assert status == 200
        pages.append(page)
        seen += [j["id"] for j in page["jobs"]]
        if page["last"]:
            break
        cursor = page["next"]
    assert seen == newest_first
    assert [len(p["jobs"]) for p in pages] == [2, 2, 1]
    status, back = await api.call("GET", f"/v1/jobs?limit=2&before={pages[2]['prev']}", token)
    assert status == 200
    assert [j["id"] for j in back["jobs"]] == newest_first[2:4]
    filtered = await api.call("GET", "/v1/jobs?state=ready&queue=default&name=send_mail", token)
    assert len(filtered[1]["jobs"]) == 5
    assert (await api.call("GET", "/v1/jobs?state=dead", token))[1]["jobs"] == []


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("?limit=x", "X_JOB_PAGE_INVALID"),
        ("?limit=%C2%B2", "X_JOB_PAGE_INVALID"),
        ("?limit=0", "X_JOB_PAGE_INVALID"),
        ("?limit=201", "X_JOB_PAGE_INVALID"),
        ("?after=garbage", "X_JOB_PAGE_INVALID"),
        ("?after=a&before=b", "X_JOB_PAGE_INVALID"),
        ("?state=sleeping", "X_INPUT_INVALID"),
        ("?colour=red", "X_INPUT_INVALID"),
    ],
)
async def test_a_bad_page_is_400(api: Api, query: str, code: str) -> None:
    status, body = await api.call("GET", "/v1/jobs" + query, await api.token("read"))
    assert status == 400
    assert body["error"]["code"] == code


async def test_moves_and_their_409s(api: Api, pg_pool: Any) -> None:
    token = await api.token("operate", "read")
    ready = await enqueue(api, ORG_A, "a@x.io")
    status, body = await api.call("POST", f"/v1/jobs/{ready}/cancel", token, {"reason": "oops"})
    assert (status, body["state"], body["lastError"]) == (200, "cancelled", "cancelled: oops")
    again = await api.call("POST", f"/v1/jobs/{ready}/cancel", token)
    assert (again[0], again[1]["error"]["code"]) == (409, "X_JOB_NOT_CANCELLABLE")
    status, body = await api.call("POST", f"/v1/jobs/{ready}/retry", token)
    assert (status, body["state"]) == (200, "ready")
    live = await api.call("POST", f"/v1/jobs/{ready}/retry", token)
    assert (live[0], live[1]["error"]["code"]) == (409, "X_JOB_NOT_REQUEUEABLE")
    not_waiting = await api.call("POST", f"/v1/jobs/{ready}/promote", token)
    assert (not_waiting[0], not_waiting[1]["error"]["code"]) == (409, "X_JOB_NOT_PROMOTABLE")

    delayed = await enqueue(api, ORG_A, "d@x.io", delay="1h")
    status, body = await api.call("POST", f"/v1/jobs/{delayed}/promote", token)
    assert (status, body["state"]) == (200, "ready")

    status, body = await api.call("DELETE", f"/v1/jobs/{delayed}", token)
    assert (status, body) == (200, {"id": delayed, "removed": True})
    gone = await api.call("GET", f"/v1/jobs/{delayed}", token)
    assert gone[0] == 404

    driver = postgres_driver(pg_pool)
    [claimed] = await driver.claim(ClaimOptions(queues=["default"], limit=1, worker_id="w"))
    running = await api.call("DELETE", f"/v1/jobs/{claimed.id}", token)
    assert (running[0], running[1]["error"]["code"]) == (409, "X_JOB_NOT_REMOVABLE")
    bad_body = await api.call("POST", f"/v1/jobs/{claimed.id}/cancel", token, {"reason": 7})
    assert bad_body[0] == 400


async def test_retry_from_a_step(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    await run_to(postgres_driver(pg_pool), job_id, steps=("render", "send"), dead="X_SMTP")
    token = await api.token("operate", "read")
    status, body = await api.call("POST", f"/v1/jobs/{job_id}/retry", token, {"fromStep": "send"})
    assert (status, body["state"]) == (200, "ready")
    shown = (await api.call("GET", f"/v1/jobs/{job_id}", token))[1]
    assert [s["name"] for s in shown["steps"]] == ["render"]
    assert all("output" not in s for s in shown["steps"])


async def test_moves_need_the_operate_scope(api: Api) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    reader = await api.token("read")
    status, body = await api.call("POST", f"/v1/jobs/{job_id}/cancel", reader)
    assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN")
    assert (await api.call("GET", f"/v1/jobs/{job_id}", None))[0] == 401
    writer = await api.token("operate")
    assert (await api.call("GET", f"/v1/jobs/{job_id}", writer))[0] == 403


async def test_queues(api: Api, pg_pool: Any, clock: FrozenClock) -> None:
    await enqueue(api, ORG_A, "a@x.io")
    token = await api.token("read", "operate")
    status, body = await api.call("GET", "/v1/queues", token)
    assert status == 200
    driver = postgres_driver(pg_pool, clock=clock)
    assert body == {"queues": await inspect_queues(driver, clock.now_ms())}
    status, body = await api.call("POST", "/v1/queues/mail/pause", token)
    assert (status, body) == (200, {"queues": ["mail"], "paused": True})
    listed = {
        q["queue"]: q["paused"] for q in (await api.call("GET", "/v1/queues", token))[1]["queues"]
    }
    assert listed == {"default": False, "mail": True}
    assert (await api.call("POST", "/v1/queues/mail/resume", token))[1]["paused"] is False
    assert await pg_pool.fetchval("select count(*) from x_job_pauses") == 0
    bad = await api.call("POST", "/v1/queues/a b/pause", token)
    assert (bad[0], bad[1]["error"]["code"]) == (400, "X_INPUT_INVALID")


async def test_tasks(api: Api) -> None:
    token = await api.token("read", "operate")
    status, body = await api.call("GET", "/v1/tasks", token)
    assert status == 200
    [task] = body["tasks"]
    assert (task["name"], task["cron"], task["paused"]) == ("nightly_digest", "0 3 * * *", False)
    paused = await api.call("POST", "/v1/tasks/nightly_digest/pause", token)
    assert paused == (200, {"tasks": ["nightly_digest"], "paused": True})
    assert (await api.call("GET", "/v1/tasks", token))[1]["tasks"][0]["paused"] is True
    await api.call("POST", "/v1/tasks/nightly_digest/resume", token)
    assert (await api.call("GET", "/v1/tasks", token))[1]["tasks"][0]["paused"] is False
    unknown = await api.call("POST", "/v1/tasks/nope/pause", token)
    assert (unknown[0], unknown[1]["error"]["code"]) == (404, "X_TASK_UNKNOWN")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/queues"),
        ("POST", "/v1/queues/mail/pause"),
        ("GET", "/v1/tasks"),
        ("POST", "/v1/tasks/nightly_digest/resume"),
    ],
)
async def test_queues_and_tasks_need_an_operator_token(api: Api, method: str, path: str) -> None:
    tenant = await api.token("admin", tenant=ORG_A)
    status, body = await api.call(method, path, tenant)
    assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN")


async def test_tokens_list_needs_an_operator_admin_token_and_never_shows_a_secret(
    api: Api,
) -> None:
    """``GET /v1/tokens`` (what ``ujobs tokens list`` prints remotely): tokens span every
    tenant, so neither tenant's token reads it, whatever its scopes."""
    admin = await api.issue("admin")
    a = await api.issue("admin", tenant=ORG_A)
    b = await api.issue("read", "enqueue:*", tenant=ORG_B)
    status, body = await api.call("GET", "/v1/tokens", admin.secret)
    assert status == 200, body
    assert {t["id"]: t["tenant"] for t in body["tokens"]} == {
        admin.record.id: None,
        a.record.id: ORG_A,
        b.record.id: ORG_B,
    }
    listed = str(body)
    assert all(t.secret not in listed for t in (admin, a, b))
    assert all("token" not in t for t in body["tokens"])
    for tenant_token in (a.secret, b.secret):
        status, refused = await api.call("GET", "/v1/tokens", tenant_token)
        assert (status, refused["error"]["code"]) == (403, "X_FORBIDDEN")
    reader = await api.token("read")  # an operator, but not admin
    status, refused = await api.call("GET", "/v1/tokens", reader)
    assert (status, refused["error"]["code"]) == (403, "X_FORBIDDEN")
    assert (await api.call("GET", "/v1/tokens", None))[0] == 401


async def test_a_list_takes_an_id_prefix_within_the_tokens_tenant(api: Api) -> None:
    mine = await enqueue(api, ORG_A, "a@x.io")
    theirs = await enqueue(api, ORG_B, "b@x.io")
    a = await api.token("read", tenant=ORG_A)
    status, body = await api.call("GET", f"/v1/jobs?idPrefix={mine[:13].upper()}", a)
    assert (status, [j["id"] for j in body["jobs"]]) == (200, [mine])
    status, body = await api.call("GET", f"/v1/jobs?idPrefix={theirs[:20]}", a)
    assert (status, body["jobs"]) == (200, [])


@pytest.mark.parametrize(
    ("param", "value"),
    [
        ("tenantId", "t" * 201),
        ("queue", "q" * 201),
        ("name", "n" * 201),
        ("idPrefix", "0" * 201),
        ("tenantId", "é" * 101),  # 202 bytes of UTF-8: the limit is in bytes
        ("queue", "nul\x00byte"),
    ],
)
async def test_a_list_filter_past_its_limit_is_400_naming_it_for_any_token(
    api: Api, param: str, value: str
) -> None:
    """A filter no row could match past its length (``ujobs.limits``) is refused, not an
    empty page, whoever asks: the same 400 for a tenant token and an operator."""
    from urllib.parse import quote

    for token in (await api.token("read"), await api.token("read", tenant=ORG_A)):
        status, body = await api.call("GET", f"/v1/jobs?{param}={quote(value)}", token)
        assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID"), body
        assert body["error"]["meta"]["issues"][0]["path"] == param


async def test_a_request_after_the_pool_closed_is_503_x_draining_not_a_bug(api: Api) -> None:
    """The api closes its pool at the end of its drain; a request still in flight then is the
    drain's 503 (another replica takes it), never a 500 X_INTERNAL."""
    from ujobs.services.api.common import BACKEND

    token = await api.token("read")
    pool = api.client.app[BACKEND].pool
    assert pool is not None
    await pool.close()
    status, body = await api.call("GET", "/v1/jobs", token)
    assert (status, body["error"]["code"]) == (503, "X_DRAINING"), body


async def test_one_queue_names_whose_due_work_waits_to_an_operator_only(
    api: Api, pg_dsn: str
) -> None:
    for n in range(3):
        await enqueue(api, ORG_A, f"a{n}@x.io", queue="mail")
    await enqueue(api, ORG_B, "b@x.io", queue="mail")
    operator = await api.token("read")
    status, body = await api.call("GET", "/v1/queues/mail", operator)
    assert status == 200, body
    assert [(t["tenantId"], t["due"]) for t in body["tenants"]] == [(ORG_A, 3), (ORG_B, 1)]
    assert body["tenantsCapped"] is False
    assert (body["queue"], body["ready"]) == ("mail", 4)
    # A tenant token would learn other tenants' names: 403, as for the queues list.
    tenant = await api.token("read", tenant=ORG_A)
    status, body = await api.call("GET", "/v1/queues/mail", tenant)
    assert (status, body["error"]["code"]) == (403, "X_FORBIDDEN")
    status, body = await api.call("GET", "/v1/queues/no%20such", operator)
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
    # The CLI prints the same read.
    shown = json_of(await asyncio.to_thread(ujobs, "queues", "show", "mail", "--json", dsn=pg_dsn))
    assert [(t["tenantId"], t["due"]) for t in shown["tenants"]] == [(ORG_A, 3), (ORG_B, 1)]
    table = await asyncio.to_thread(ujobs, "queues", "show", "mail", dsn=pg_dsn)
    assert table.exit_code == 0, table.stdout + table.stderr
    assert ORG_A in table.stdout


@pytest.mark.parametrize("spelled", ["mail/bulk", "mail%2Fbulk"])
async def test_a_queue_name_with_a_slash_is_reachable_raw_or_percent_encoded(
    api: Api, pg_pool: Any, spelled: str
) -> None:
    """Queue names may hold ``/`` (``NAME_PATTERN``); a generated client sends it as ``%2F``,
    a person types it raw: both reach the queue, show, pause and resume."""
    await enqueue(api, ORG_A, "a@x.io", queue="mail/bulk")
    operator = await api.token("read", "operate")
    status, body = await api.call("GET", f"/v1/queues/{spelled}", operator)
    assert (status, body["queue"], body["ready"]) == (200, "mail/bulk", 1), body
    status, body = await api.call("POST", f"/v1/queues/{spelled}/pause", operator)
    assert (status, body) == (200, {"queues": ["mail/bulk"], "paused": True})
    paused = await pg_pool.fetch("select name from x_job_pauses where kind = 'queue'")
    assert [r["name"] for r in paused] == ["mail/bulk"]
    status, body = await api.call("POST", f"/v1/queues/{spelled}/resume", operator)
    assert (status, body) == (200, {"queues": ["mail/bulk"], "paused": False})


async def test_cancel_takes_the_live_children_unless_told_to_detach_them(
    api: Api, pg_pool: Any
) -> None:
    token = await api.token("enqueue:*", "operate", "read")
    driver = postgres_driver(pg_pool)
    parents = []
    for n in range(2):
        status, body = await api.call(
            "POST", "/v1/jobs/send_mail", token, {"input": mail(ORG_A, to=f"p{n}@x.io")}
        )
        assert status == 202, body
        request = EnqueueRequest(
            name="send_mail", input=mail(ORG_A, to=f"kid{n}@x.io"), idempotency_key=f"kid{n}"
        )
        child = await driver.children.enqueue(request, parent_id=body["id"], detached=False)
        assert child is not None
        parents.append((body["id"], child.id))
    (first, first_kid), (second, second_kid) = parents
    status, _ = await api.call("POST", f"/v1/jobs/{first}/cancel", token, {})
    assert status == 200
    status, body = await api.call(
        "POST", f"/v1/jobs/{second}/cancel", token, {"detachChildren": True}
    )
    assert status == 200, body
    status, kid = await api.call("GET", f"/v1/jobs/{first_kid}", token)
    assert (status, kid["state"]) == (200, "cancelled")
    status, kid = await api.call("GET", f"/v1/jobs/{second_kid}", token)
    assert (status, kid["state"]) == (200, "ready")
    status, body = await api.call(
        "POST", f"/v1/jobs/{second_kid}/cancel", token, {"detachChildren": "yes"}
    )
    assert (status, body["error"]["code"]) == (400, "X_INPUT_INVALID")
