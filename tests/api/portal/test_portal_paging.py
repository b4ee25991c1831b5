"""The portal's endpoint list pages (the admin API's cursor, 50 a page) in a real browser (Chromium through
Playwright) against the real API and RabbitMQ: a tenant with more endpoints than a page sees them all, page by
page, in name order, and none of another tenant's; an endpoint created there shows its home (a shared lane)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.ingest.conftest import TOKEN, ApiServer
from warren.topology.config import WarrenConfig

pytestmark = [pytest.mark.timeout(180), pytest.mark.parametrize("store_url", ["sqlite"], indirect=True)]

PAGE = 50  # the portal's page (portal.js)
OWN = PAGE + 3
CREATES_AT_ONCE = 4


async def names_listed(page: Any, count: int) -> list[str]:
    """The names in the list once it shows ``count`` rows (waited for by locator: the CSP forbids eval)."""
    from playwright.async_api import expect

    rows = page.locator("table tbody tr")
    await expect(rows).to_have_count(count)
    return [text.strip() for text in await page.locator("table tbody tr td:first-child").all_text_contents()]


async def test_a_tenant_pages_through_more_endpoints_than_a_page_holds(
    make_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    store_url: str,
    browser_page: Any,
) -> None:
    page = browser_page
    # Given `warren api` with lanes (endpoints created without a home share them), a tenant with 53 endpoints,
    # and another tenant's endpoint whose name sorts among them
    config = make_config(
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]}, store={"url": store_url}, lanes={"count": 2}
    )
    api = await start_api(config)
    own = [f"acme-{n:03d}" for n in range(OWN)]

    async def create(name: str, tenant: str) -> None:
        body = {"name": name, "url": f"http://127.0.0.1:9/{name}", "events": ["order.*"], "tenant": tenant}
        reply = await api.request("POST", "/v1/endpoints", body, token=ADMIN_TOKEN)
        assert reply.status == 201, reply.body

    for start in range(0, OWN, CREATES_AT_ONCE):
        await asyncio.gather(*(create(name, "acme") for name in own[start : start + CREATES_AT_ONCE]))
    await create("acme-025x", "globex")
    session = await api.request("POST", "/v1/tenants/acme/sessions", {"ttl": 600}, token=ADMIN_TOKEN)
    assert session.status == 201, session.body
    # When the tenant opens the portal: the first page holds the first 50 in name order, and a way on
    await page.goto(f"{api.url}/portal#session={session.body['token']}")
    await page.get_by_role("heading", name="Endpoints").wait_for()
    assert await names_listed(page, PAGE) == own[:PAGE]
    assert not await page.get_by_role("link", name="First page").count()
    # And following it shows the other three, with no way on but back to the first
    await page.get_by_role("link", name="Next page").click()
    assert await names_listed(page, 3) == own[PAGE:]
    assert not await page.get_by_role("link", name="Next page").count()
    # And the browser's Back returns to the first page; "First page" does too
    await page.go_back()
    assert await names_listed(page, PAGE) == own[:PAGE]
    await page.get_by_role("link", name="Next page").click()
    await page.get_by_role("link", name="First page").click()
    assert await names_listed(page, PAGE) == own[:PAGE]
    # And an endpoint opened from the list shows its home: created without one, with lanes on, a shared lane
    await page.get_by_role("link", name="acme-007").click()
    await page.get_by_role("heading", name="acme-007").wait_for()
    assert await page.locator("#home").text_content() == "shared lane"
