"""The portal's browser: Debian's Chromium (scripts/browser) driven by Playwright; skipped without it, failed on CI."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator

import pytest

from tests.api.ingest.conftest import start_api
from tests.support.delivery import receiver
from tests.support.store import store_postgres, store_url

__all__ = ["receiver", "start_api", "store_postgres", "store_url"]


@pytest.fixture
async def browser_page() -> AsyncIterator[object]:
    """A fresh page of a headless Chromium."""
    path = os.environ.get("WARREN_TEST_BROWSER") or shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        if os.environ.get("CI"):
            pytest.fail("no Chromium for the portal tests: scripts/browser installs it")
        pytest.skip("no Chromium (scripts/browser installs it)")
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=path, args=["--no-sandbox", "--disable-gpu"])
        try:
            context = await browser.new_context(viewport={"width": 1200, "height": 900})
            page = await context.new_page()
            page.set_default_timeout(15_000)
            yield page
        finally:
            await browser.close()
