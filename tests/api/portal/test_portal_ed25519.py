"""The portal with an endpoint that signs with Ed25519 only: its "Rotate the secret" rotates the Ed25519 key (it
never adds HMAC signing) and shows the new public key beside the secret key, as the API does."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.ingest.conftest import TOKEN, ApiServer
from tests.support.receiver import Receiver
from warren.topology.config import WarrenConfig

pytestmark = pytest.mark.timeout(120)


async def test_the_portal_rotates_an_ed25519_key_and_shows_its_public_key(
    make_config: Callable[..., WarrenConfig],
    start_api: Callable[..., Awaitable[ApiServer]],
    store_url: str,
    receiver: Receiver,
    browser_page: Any,
) -> None:
    config = make_config(api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]}, store={"url": store_url})
    api = await start_api(config)
    endpoint = {"name": "acme-ed", "url": receiver.url, "events": ["#"], "tenant": "acme", "signing": ["ed25519"]}
    assert (await api.request("POST", "/v1/endpoints", endpoint, token=ADMIN_TOKEN)).status == 201
    session = await api.request("POST", "/v1/tenants/acme/sessions", {"ttl": 600}, token=ADMIN_TOKEN)
    page = browser_page
    await page.goto(f"{api.url}/portal#session={session.body['token']}")
    await page.get_by_role("heading", name="Endpoints").wait_for()
    await page.goto(f"{api.url}/portal#/endpoints/acme-ed")
    await page.get_by_role("button", name="Rotate the secret").click()
    public = await page.locator("#rotated #public-key").text_content()
    secret_key = await page.locator("#rotated .secret").text_content()
    keys = await api.request("GET", "/v1/endpoints/acme-ed/public-keys", token=ADMIN_TOKEN)
    assert public is not None and public.startswith("whpk_") and keys.body["keys"][0]["public_key"] == public
    assert secret_key is not None and secret_key.startswith("whsk_")
    read = await api.request("GET", "/v1/endpoints/acme-ed", token=ADMIN_TOKEN)
    assert {s["scheme"] for s in read.body["secrets"]} == {"ed25519"}  # no HMAC secret was added
