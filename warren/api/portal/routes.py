"""``/portal``: the endpoint portal a platform links to or embeds in an iframe, for one tenant at a time.

A page and two files (``static/``): no build step, no CDN, nothing fetched from elsewhere at run time. The
page is the platform's, themed by ``[portal]`` (title, logo, accent colour); its script talks to the admin API
with a portal session (``POST /v1/tenants/{tenant}/sessions``, warren/store/sessions.py) that the platform's
backend mints and puts in the link's fragment (``/portal#session=wps_...``: a fragment never reaches a server
log or a Referer). The script keeps it for the tab (sessionStorage) and drops it from the address bar.

What the tenant may see and do is the admin API's to decide (a session is confined to its tenant); the page
only shows it. Every text from the API is written with ``textContent``, never as HTML.
"""

from __future__ import annotations

import html
from importlib import resources

from aiohttp import web

from warren.topology.settings import PortalSettings

__all__ = ["PORTAL", "add_portal_routes"]

PORTAL = "/portal"
_FILES = {"portal.js": "text/javascript", "portal.css": "text/css"}


def _read(name: str) -> str:
    return resources.files("warren.api.portal").joinpath("static", name).read_text(encoding="utf-8")


def page(settings: PortalSettings) -> str:
    """The page, themed: every configured value escaped for where it goes."""
    logo = (
        f'<img class="logo" src="{html.escape(settings.logo_url, quote=True)}" alt="" width="32" height="32">'
        if settings.logo_url
        else ""
    )
    return (
        _read("portal.html")
        .replace("{{title}}", html.escape(settings.title))
        .replace("{{logo}}", logo)
        .replace("{{accent}}", settings.accent_color)  # validated: #rrggbb
    )


def _policy(settings: PortalSettings) -> str:
    ancestors = " ".join(settings.frame_ancestors) or "'self'"
    return (
        "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; "
        f"img-src 'self' https: data:; base-uri 'none'; form-action 'none'; frame-ancestors {ancestors}"
    )


def add_portal_routes(app: web.Application, settings: PortalSettings) -> None:
    body = page(settings).encode()
    files = {name: (_read(name).encode(), kind) for name, kind in _FILES.items()}
    headers = {
        "Content-Security-Policy": _policy(settings),
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "no-referrer",
        "Cache-Control": "no-store",
    }

    async def portal(_: web.Request) -> web.Response:
        return web.Response(body=body, content_type="text/html", charset="utf-8", headers=headers)

    async def static(request: web.Request) -> web.Response:
        found = files.get(request.match_info["name"])
        if found is None:
            raise web.HTTPNotFound()
        content, kind = found
        return web.Response(body=content, content_type=kind, charset="utf-8", headers=headers)

    app.router.add_get(PORTAL, portal)
    app.router.add_get(PORTAL + "/static/{name}", static)
