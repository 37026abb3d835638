"""An unknown path under ``/_x`` is an HTML 404 in the dashboard's layout (navigation included
for a logged-in viewer), a wrong method an HTML 405; the api's ``/v1`` keeps its JSON errors."""

from __future__ import annotations

from playwright.async_api import expect

from tests.browser.support import Dash


async def test_an_unknown_dashboard_path_is_an_html_404_in_the_layout(dash: Dash) -> None:
    page = await dash.page_as(await dash.api.token("read"))
    response = await page.goto(dash.url("/_x/no-such-page"))
    assert response is not None
    assert response.status == 404
    assert response.headers["content-type"].startswith("text/html")
    await expect(page.locator("h1")).to_have_text("Page not found")
    await expect(page.get_by_text("X_NOT_FOUND")).to_be_visible()
    await expect(page.get_by_role("navigation", name="Sections")).to_be_visible()
    await dash.shot(page, "not-found")
    await page.click("#home")
    assert page.url.endswith("/_x/queues")
    response = await page.goto(dash.url("/_x/act"))
    assert response is not None
    assert response.status == 405
    await expect(page.locator("h1")).to_have_text("Not served here")
    await expect(page.get_by_text("GET is not served at /_x/act; it answers POST")).to_be_visible()


async def test_logged_out_the_404_has_no_navigation_and_v1_stays_json(dash: Dash) -> None:
    context = await dash.browser.new_context()
    page = await context.new_page()
    try:
        response = await page.goto(dash.url("/_x/static/nope.css"))
        assert response is not None
        assert response.status == 404
        await expect(page.locator("h1")).to_have_text("Page not found")
        await expect(page.get_by_role("navigation", name="Sections")).to_have_count(0)
        # A cookie whose token may not read shows no navigation either.
        writer = await dash.api.token("enqueue:*")
        await context.add_cookies([{"name": "ujobs_x", "value": writer, "url": dash.base}])
        response = await page.goto(dash.url("/_x/nope"))
        assert response is not None
        assert response.status == 404
        await expect(page.locator("h1")).to_have_text("Page not found")
        await expect(page.get_by_role("navigation", name="Sections")).to_have_count(0)
    finally:
        await context.close()
    answer = await dash.api.client.get("/v1/no-such-route")
    assert answer.status == 404
    assert (await answer.json())["error"]["code"] == "X_NOT_FOUND"
    answer = await dash.api.client.get("/_xylophone")
    assert answer.status == 404
    assert answer.content_type == "application/json"
