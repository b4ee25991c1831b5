"""The endpoint portal in a real browser (Chromium, through Playwright) against the real API, a worker, RabbitMQ
and a receiver on 127.0.0.1: a tenant's session adds an endpoint, reads a delivery's attempts with the answer's
start, sends it again, rotates the secret, and cannot reach another tenant's endpoint by editing the address."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.support.receiver import Receiver, Reply
from warren.consumers.worker import Worker
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(180)

SHOTS = os.environ.get("WARREN_PORTAL_SCREENSHOTS")  # a folder: the docs' screenshots are taken there


async def shot(page: Any, name: str) -> None:
    if SHOTS:
        await page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=True)


async def test_a_tenant_manages_its_endpoint_in_the_portal(
    make_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    store_url: str,
    receiver: Receiver,
    browser_page: Any,
) -> None:
    page = browser_page
    # Given `warren api` with a store, a worker, an endpoint of another tenant, and a session of tenant acme
    config = make_config(
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]},
        store={"url": store_url},
        worker={"attempt_log_interval": "50ms"},
        retry={"base": "20ms", "cap": "50ms", "max_attempts": 2},
        portal={"title": "Acme Platform webhooks", "accent_color": "#7c3aed"},
    )
    api = await start_api(config)
    other = {"name": "globex-orders", "url": receiver.url + "/globex", "events": ["order.*"], "tenant": "globex"}
    assert (await api.request("POST", "/v1/endpoints", other, token=ADMIN_TOKEN)).status == 201
    session = await api.request("POST", "/v1/tenants/acme/sessions", {"ttl": 600}, token=ADMIN_TOKEN)
    assert session.status == 201
    receiver.behaviour = lambda r, request, body: Reply(
        400, headers={"Content-Type": "application/json"}, body=b'{"error": "amount must be positive"}'
    )
    async with Worker(config):
        # When the tenant opens the link: the session leaves the address bar, the platform's title shows
        await page.goto(f"{api.url}/portal#session={session.body['token']}")
        await page.get_by_role("heading", name="Endpoints").wait_for()
        assert "session=" not in page.url and await page.title() == "Acme Platform webhooks"
        assert await page.get_by_text("No endpoint yet.").is_visible()
        await shot(page, "list-empty")
        # And adds an endpoint with the keyboard (fields found by their labels), then sees its secret once
        await page.get_by_role("link", name="Add an endpoint").click()
        await page.get_by_label("Name").fill("acme-orders")
        await page.get_by_label("URL").fill(receiver.url + "/acme-orders")
        await page.get_by_label("Other event types or patterns").fill("order.*")
        await shot(page, "add")
        await page.get_by_label("Other event types or patterns").press("Enter")
        secret = await page.locator("#secret").text_content()
        assert secret is not None and secret.startswith("whsec_")
        # And an order of acme, delivered and refused with 400, shows in its attempts with the answer's start
        event = {"type": "order.paid", "data": {"amount": -1}, "tenant": "acme"}
        published = await api.request("POST", "/v1/events", event, token=TOKEN)
        assert published.status == 202, published.body
        await page.get_by_role("link", name="Go to the endpoint").click()
        deadline = time.monotonic() + 30
        while not await page.get_by_text("amount must be positive").count():
            assert time.monotonic() < deadline, "the attempt never showed in the portal"
            await page.reload()
            await page.get_by_role("heading", name="acme-orders").wait_for()
        row = page.locator("#attempts tbody tr").first
        assert "dead" in (await row.text_content() or "") and "400" in (await row.text_content() or "")
        await shot(page, "endpoint")
        # When the receiver is fixed and the tenant sends that event again, then it arrives
        receiver.behaviour = lambda r, request, body: Reply(200)
        await page.get_by_role("button", name=f"Send {published.body['id']} again").click()
        await page.get_by_text(f"Event {published.body['id']} sent again.").wait_for()
        await receiver.wait_for(lambda r: published.body["id"] in r.ok_ids(), 20)
        # And what failed for good since a moment: a second event refused, recovered with the last hour's
        later = "evt_portal_later"
        receiver.behaviour = lambda r, request, body: Reply(503 if request.headers["webhook-id"] == later else 200)
        second = await api.request("POST", "/v1/events", {**event, "id": later}, token=TOKEN)
        assert second.status == 202, second.body
        deadline = time.monotonic() + 30
        while not await page.get_by_role("button", name=f"Send {later} again").count():
            assert time.monotonic() < deadline, "the second attempt never showed as failed for good"
            await page.reload()
            await page.get_by_role("heading", name="acme-orders").wait_for()
        receiver.behaviour = lambda r, request, body: Reply(200)
        await page.get_by_role("button", name="Recover").click()
        await page.get_by_text("1 event(s) sent again.").wait_for()
        await receiver.wait_for(lambda r: later in r.ok_ids(), 20)
        # And a rotation shows the new secret, once
        await page.get_by_role("button", name="Rotate the secret").click()
        rotated = await page.locator("#rotated .secret").text_content()
        assert rotated is not None and rotated.startswith("whsec_") and rotated != secret
        # And the other tenant's endpoint, typed into the address, is not found; its events never show
        await page.goto(f"{api.url}/portal#/endpoints/globex-orders")
        await page.get_by_role("heading", name="Not found").wait_for()
        await page.goto(f"{api.url}/portal#/")
        await page.get_by_role("heading", name="Endpoints").wait_for()
        listed = await page.locator("table").text_content()
        assert listed is not None and "acme-orders" in listed and "globex" not in listed
        await shot(page, "list")


async def test_without_a_session_or_after_it_the_portal_says_so(
    make_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    store_url: str,
    browser_page: Any,
) -> None:
    config = make_config(api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]}, store={"url": store_url})
    api = await start_api(config)
    page = browser_page
    await page.goto(f"{api.url}/portal")
    await page.get_by_role("heading", name="No session").wait_for()
    ended = await api.request("POST", "/v1/tenants/acme/sessions", {"ttl": 0.2}, token=ADMIN_TOKEN)
    await asyncio.sleep(0.3)  # past its end: the portal must say so, not show an error
    await page.goto(f"{api.url}/portal#session={ended.body['token']}")
    await page.get_by_role("heading", name="Session over").wait_for()
