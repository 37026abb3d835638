"""The dashboard's HTTP rules without a browser: the login cookie's attributes, CSRF and
origin checks on every action, the confirmation step, safe redirects and tenancy."""

from __future__ import annotations

import re
from typing import Any

import asyncpg
import pytest

from tests.services.api_support import ORG_A, ORG_B, Api, MakeClient, mail, make_api
from tests.support.cli import run_to
from tests.support.docs import DOCS, page
from ujobs.drivers.base import EnqueueRequest
from ujobs.drivers.postgres import postgres_driver
from ujobs.execution.settle import last_error_text
from ujobs.introspect import get_job
from ujobs.services.dashboard.session import COOKIE, csrf_token, safe_next


@pytest.fixture
async def api(aiohttp_client: MakeClient, pg_dsn: str, pg_pool: asyncpg.Pool[Any]) -> Api:
    return await make_api(aiohttp_client, pg_dsn, pg_pool)


async def enqueue(api: Api, org: str, to: str) -> str:
    token = await api.token("enqueue:*")
    status, body = await api.call("POST", "/v1/jobs/send_mail", token, {"input": mail(org, to=to)})
    assert status == 202, body
    return str(body["id"])


async def login(api: Api, secret: str) -> None:
    response = await api.client.post(
        "/_x/login", data={"token": secret, "next": "/_x/jobs"}, allow_redirects=False
    )
    assert response.status == 303, await response.text()
    assert response.headers["Location"] == "/_x/jobs"
    cookie = response.headers["Set-Cookie"]
    assert cookie.startswith(f"{COOKIE}={secret};")
    assert "HttpOnly" in cookie
    assert "SameSite=Strict" in cookie
    assert "Path=/_x" in cookie


async def test_the_login_sets_a_strict_httponly_cookie_and_refuses_a_bad_token(api: Api) -> None:
    response = await api.client.get("/_x/queues", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/_x/login?next=/_x/queues"
    bad = await api.client.post("/_x/login", data={"token": "nope"}, allow_redirects=False)
    assert bad.status == 401
    assert "unknown token" in await bad.text()
    assert COOKIE not in bad.cookies
    await login(api, await api.token("read", "operate"))
    page = await api.client.get("/_x/queues")
    assert page.status == 200
    assert "<h1>Queues</h1>" in await page.text()


@pytest.mark.parametrize(
    "headers",
    [
        {"Origin": "null"},  # a sandboxed frame or a data: page on the attacker's site
        {"Origin": "https://evil.example"},
        {"Referer": "https://evil.example/login-csrf.html"},
    ],
)
async def test_the_login_refuses_a_null_or_cross_site_origin(
    api: Api, headers: dict[str, str]
) -> None:
    """Login CSRF: the login form carries no CSRF token (there is no cookie yet), so another
    site posting the attacker's token would log the browser in as the attacker."""
    attackers = await api.token("read", "operate", tenant=ORG_B)
    refused = await api.client.post(
        "/_x/login", data={"token": attackers}, headers=headers, allow_redirects=False
    )
    assert refused.status == 403
    assert "another site" in await refused.text()
    assert COOKIE not in refused.cookies
    assert "Set-Cookie" not in refused.headers
    same = str(api.client.make_url("/_x/login"))
    await login(api, attackers)  # no Origin (a script): the token decides, as before
    kept = await api.client.post(
        "/_x/login",
        data={"token": attackers, "next": "/_x/jobs"},
        headers={"Origin": same.removesuffix("/_x/login")},
        allow_redirects=False,
    )
    assert kept.status == 303


async def test_an_action_needs_the_csrf_token_a_same_origin_and_a_confirmation(
    api: Api, pg_pool: Any
) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    await run_to(postgres_driver(pg_pool), job_id, dead="boom")
    secret = await api.token("read", "operate")
    await login(api, secret)
    form = {"action": "retry", "target": job_id, "back": "/_x/dead", "confirm": "yes"}
    missing = await api.client.post("/_x/act", data=form, allow_redirects=False)
    assert missing.status == 403
    assert "CSRF" in await missing.text()
    signed = {**form, "csrf": csrf_token(secret)}
    foreign = await api.client.post(
        "/_x/act", data=signed, headers={"Origin": "https://evil.example"}, allow_redirects=False
    )
    assert foreign.status == 403
    sandboxed = await api.client.post(
        "/_x/act", data=signed, headers={"Origin": "null"}, allow_redirects=False
    )
    assert sandboxed.status == 403
    unconfirmed = await api.client.post(
        "/_x/act", data={**signed, "confirm": ""}, allow_redirects=False
    )
    assert unconfirmed.status == 200
    assert "Re-queue job" in await unconfirmed.text()
    assert (await get_job(postgres_driver(pg_pool), job_id)).state == "dead"
    done = await api.client.post("/_x/act", data=signed, allow_redirects=False)
    assert done.status == 303
    assert done.headers["Location"] == "/_x/dead?done=retry"
    assert (await get_job(postgres_driver(pg_pool), job_id)).state == "ready"


async def test_a_read_only_token_cannot_act_and_a_tenant_cannot_see_queues_or_others(
    api: Api, pg_pool: Any
) -> None:
    theirs = await enqueue(api, ORG_B, "b@x.io")
    reader = await api.token("read")
    await login(api, reader)
    form = {"action": "cancel", "target": theirs, "confirm": "yes", "csrf": csrf_token(reader)}
    refused = await api.client.post("/_x/act", data=form, allow_redirects=False)
    assert refused.status == 403
    assert "X_FORBIDDEN" in await refused.text()
    tenant = await api.token("read", "operate", tenant=ORG_A)
    await login(api, tenant)
    assert (await api.client.get("/_x/queues")).status == 403
    assert (await api.client.get(f"/_x/jobs/{theirs}")).status == 404
    form["csrf"] = csrf_token(tenant)
    hidden = await api.client.post("/_x/act", data=form, allow_redirects=False)
    assert hidden.status == 404
    assert (await get_job(postgres_driver(pg_pool), theirs)).state == "ready"


async def test_the_job_page_shows_the_stack_to_operators_only(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    try:
        raise ValueError("the partner refused the card")
    except ValueError as exc:
        text = last_error_text(exc)
    await run_to(postgres_driver(pg_pool), job_id, dead=text)
    await login(api, await api.token("read", tenant=ORG_A))
    tenants = await (await api.client.get(f"/_x/jobs/{job_id}")).text()
    assert "ValueError: the partner refused the card" in tenants
    assert "Traceback" not in tenants
    assert __file__ not in tenants
    await login(api, await api.token("read"))
    operators = await (await api.client.get(f"/_x/jobs/{job_id}")).text()
    assert "Traceback" in operators
    assert __file__ in operators


async def test_the_job_page_shows_the_result_masked_like_the_input(api: Api, pg_pool: Any) -> None:
    job_id = await enqueue(api, ORG_A, "a@x.io")
    await login(api, await api.token("read", tenant=ORG_A))
    live = await (await api.client.get(f"/_x/jobs/{job_id}")).text()
    assert '<p class="none" id="result">Not done yet.</p>' in live
    await run_to(postgres_driver(pg_pool), job_id, result='{"messageId": "m-secret-42"}')
    done = await (await api.client.get(f"/_x/jobs/{job_id}")).text()
    shown = re.search(r'<pre id="result">(.*?)</pre>', done, re.DOTALL)
    assert shown is not None
    assert "messageId" in shown.group(1)
    assert "[redacted]" in shown.group(1)
    assert "m-secret-42" not in done
    assert 'Result <span class="badge">values redacted</span>' in done


async def test_the_job_page_shows_the_parent_and_the_children(api: Api, pg_pool: Any) -> None:
    parent_id = await enqueue(api, ORG_A, "a@x.io")
    driver = postgres_driver(pg_pool)
    request = EnqueueRequest(
        name="send_mail", input=mail(ORG_A, to="kid@x.io"), idempotency_key="kid", tenant_id=ORG_A
    )
    child = await driver.children.enqueue(request, parent_id=parent_id, detached=False)
    assert child is not None
    await login(api, await api.token("read", tenant=ORG_A))
    page_of_parent = await (await api.client.get(f"/_x/jobs/{parent_id}")).text()
    assert '<span class="badge" id="children-total">1</span>' in page_of_parent
    assert f'href="/_x/jobs/{child.id}"' in page_of_parent
    page_of_child = await (await api.client.get(f"/_x/jobs/{child.id}")).text()
    assert f'<a href="/_x/jobs/{parent_id}">{parent_id}</a>' in page_of_child
    assert 'id="children"' not in page_of_child


async def test_the_job_page_shows_the_priority(api: Api) -> None:
    token = await api.token("enqueue:*")
    status, urgent = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(ORG_A, to="u@x.io"), "priority": 2}
    )
    assert status == 202
    plain = await enqueue(api, ORG_A, "p@x.io")
    status, _ = await api.call(
        "POST", "/v1/jobs/send_mail", token, {"input": mail(ORG_B, to="b@x.io"), "priority": 7}
    )
    assert status == 202
    await login(api, await api.token("read", tenant=ORG_A))
    shown = await (await api.client.get(f"/_x/jobs/{urgent['id']}")).text()
    assert '<dd id="priority">2 <span class="none">(0 first, 9 last)</span></dd>' in shown
    default = await (await api.client.get(f"/_x/jobs/{plain}")).text()
    assert '<dd id="priority">0 ' in default
    # The list shows each row's priority in its own column, and only the tenant's own rows
    # (the other tenant's priority-7 job is not among them).
    listed = await (await api.client.get("/_x/jobs")).text()
    assert ">Pri</abbr></th>" in listed
    row = re.compile(r'<tr data-job="([^"]+)">.*?data-priority="(\d)"', re.S)
    assert dict(row.findall(listed)) == {urgent["id"]: "2", plain: "0"}


@pytest.mark.parametrize(
    ("raw", "kept"),
    [
        ("/_x/jobs?state=dead", "/_x/jobs?state=dead"),
        ("https://evil.example/_x/", "/_x/"),
        ("//evil.example/_x/", "/_x/"),
        ("/v1/jobs", "/_x/"),
        (None, "/_x/"),
    ],
)
def test_after_login_only_a_dashboard_path_is_followed(raw: str | None, kept: str) -> None:
    assert safe_next(raw) == kept


async def test_a_revoked_token_is_logged_out_at_its_next_request(api: Api) -> None:
    issued = await api.issue("read")
    await login(api, issued.secret)
    assert (await api.client.get("/_x/jobs")).status == 200
    await api.tokens.revoke(issued.record.id)
    response = await api.client.get("/_x/jobs", allow_redirects=False)
    assert response.status == 303
    assert response.headers["Location"] == "/_x/login?next=/_x/jobs"
    assert f'{COOKIE}=""' in response.headers["Set-Cookie"]


def test_the_dashboard_guide_shows_the_two_dashboard_screenshots() -> None:
    guide = page("guides/dashboard.md")
    images = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", guide)
    assert images == ["../dashboard/queues.png", "../dashboard/job.png"]
    for image in images:
        assert (DOCS / "guides" / image).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "DASHBOARD_README_SHOTS=docs/dashboard" in guide


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("limit=0", "X_JOB_PAGE_INVALID"),
        ("limit=%C2%B2", "X_JOB_PAGE_INVALID"),
        ("limit=200", "X_JOB_PAGE_INVALID"),
        ("after=not-a-cursor", "X_JOB_PAGE_INVALID"),
        ("state=sleeping", "X_INPUT_INVALID"),
    ],
)
async def test_a_bad_filter_is_a_page_naming_its_code(api: Api, query: str, code: str) -> None:
    await login(api, await api.token("read"))
    response = await api.client.get(f"/_x/jobs?{query}")
    assert response.status == 400
    assert response.content_type == "text/html"
    assert code in await response.text()
