"""The portal's page and files as served: themed with every value escaped, its security headers, nothing else
served, and absent when turned off."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import pytest
from pydantic import ValidationError

from tests.api.admin.conftest import ADMIN_TOKEN
from tests.api.ingest.conftest import TOKEN, ApiServer
from warren.topology.config import WarrenConfig
from warren.topology.settings import PortalSettings

pytestmark = pytest.mark.timeout(60)


async def test_the_page_is_themed_escaped_and_locked_down(
    make_config: Callable[..., WarrenConfig], start_api: Callable[..., Awaitable[ApiServer]], store_url: str
) -> None:
    portal = {
        "title": "Acme <script>alert(1)</script>",
        "logo_url": 'https://cdn.example/logo.png" onerror="alert(1)',
        "accent_color": "#112233",
        "frame_ancestors": ["https://app.example.com"],
    }
    config = make_config(
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]}, store={"url": store_url}, portal=portal
    )
    api = await start_api(config)
    async with api.session.get(api.url + "/portal") as response:
        text = await response.text()
        headers = response.headers
    assert response.status == 200 and response.content_type == "text/html"
    assert "<script>alert" not in text and "Acme &lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert 'onerror="' not in text and "&quot; onerror=&quot;" in text
    assert "--accent: #112233" in text
    policy = headers["Content-Security-Policy"]
    assert "frame-ancestors https://app.example.com" in policy and "script-src 'self'" in policy
    assert "default-src 'none'" in policy and headers["Referrer-Policy"] == "no-referrer"
    for name, kind in (("portal.js", "text/javascript"), ("portal.css", "text/css")):
        async with api.session.get(f"{api.url}/portal/static/{name}") as response:
            assert response.status == 200 and response.content_type == kind
    for name in ("portal.html", "../routes.py", "x.js"):
        async with api.session.get(f"{api.url}/portal/static/{name}") as response:
            assert response.status == 404, name


async def test_turned_off_or_without_the_admin_api_there_is_no_portal(
    make_config: Callable[..., WarrenConfig], start_api: Callable[..., Awaitable[ApiServer]], store_url: str
) -> None:
    off = make_config(
        api={"tokens": [TOKEN], "admin_tokens": [ADMIN_TOKEN]}, store={"url": store_url}, portal={"enabled": False}
    )
    no_admin = make_config(api={"tokens": [TOKEN]})
    for config in (off, no_admin):
        api = await start_api(config)
        async with api.session.get(api.url + "/portal") as response:
            assert response.status == 404


def test_theming_values_are_checked() -> None:
    for bad in ({"accent_color": "red; background: url(x)"}, {"logo_url": "javascript:alert(1)"},
                {"frame_ancestors": ["*"]}, {"frame_ancestors": ["https://a.example/path"]}):  # fmt: skip
        with pytest.raises(ValidationError):
            PortalSettings.model_validate(bad)
