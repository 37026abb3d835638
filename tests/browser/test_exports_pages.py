"""The export pages in headless chromium: the exports the CLI lists, one export's manifest,
part links that download the artifact in the browser (the api's signed links), a manifest not
written yet, and a tenant token that sees only its own exports."""

from __future__ import annotations

from pathlib import Path

from playwright.async_api import expect

from tests.browser.families import seed_exports
from tests.browser.support import ORG_A, Dash, cli
from tests.exports.export_app.jobs import expected_csv


async def test_exports_their_manifest_and_links_that_download_the_parts(
    family_dash: Dash, tmp_path: Path
) -> None:
    dash = family_dash
    exported = await seed_exports(dash.api)
    page = await dash.page_as(await dash.api.token("read"))
    await (
        page.get_by_role("navigation", name="Sections").get_by_role("link", name="Exports").click()
    )
    listed = [j["id"] for j in (await cli(dash.dsn, "exports", "list"))["jobs"]]
    shown = await page.locator("#exports tbody tr[data-export]").evaluate_all(
        "rows => rows.map(r => r.dataset.export)"
    )
    assert shown == listed
    assert set(listed) == {exported.a, exported.b, exported.waiting}
    await expect(page.locator(f'tr[data-export="{exported.a}"] .state-done')).to_be_visible()
    await dash.shot(page, "exports")
    await page.locator(f'tr[data-export="{exported.a}"] a').click()
    await expect(page.locator("#export-id")).to_have_text(exported.a)
    await expect(page.locator("#manifest-rows")).to_have_text("25")
    await expect(page.locator("#manifest-parts")).to_have_text("3")
    links = page.locator("#parts a[data-download]")
    await expect(links).to_have_count(3)
    await expect(links.first).to_be_visible()
    await dash.shot(page, "export")
    downloaded = b""
    for index in range(3):
        async with page.expect_download() as started:
            await links.nth(index).click()
        download = await started.value
        target = tmp_path / f"part-{index}"
        await download.save_as(target)
        downloaded += target.read_bytes()
    assert downloaded == expected_csv(25)
    # A link altered by hand opens nothing.
    href = await links.first.get_attribute("href")
    assert href is not None
    assert "sig=" in href
    response = await page.goto(dash.url(href.replace("/parts/0", "/parts/1")))
    assert response is not None
    assert response.status == 403
    # An export still queued has no manifest and no links yet.
    await page.goto(dash.url(f"/_x/exports/{exported.waiting}"))
    await expect(page.locator("#manifest")).to_contain_text("Not written yet")
    await expect(links).to_have_count(0)


async def test_a_tenant_token_sees_only_its_own_exports(family_dash: Dash) -> None:
    dash = family_dash
    exported = await seed_exports(dash.api)
    page = await dash.page_as(await dash.api.token("read", tenant=ORG_A))
    await page.goto(dash.url("/_x/exports"))
    shown = await page.locator("#exports tbody tr[data-export]").evaluate_all(
        "rows => rows.map(r => r.dataset.export)"
    )
    assert set(shown) == {exported.a, exported.waiting}
    response = await page.goto(dash.url(f"/_x/exports/{exported.b}"))
    assert response is not None
    assert response.status == 404
    await expect(page.get_by_text("X_EXPORT_NOT_FOUND")).to_be_visible()
    await page.goto(dash.url(f"/_x/exports/{exported.a}"))
    await expect(page.locator("#parts a[data-download]")).to_have_count(3)
