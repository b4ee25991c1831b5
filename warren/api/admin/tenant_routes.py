"""The admin API's routes under ``/v1/tenants/{tenant}``, admin tokens only: the tenant's API keys (``/keys``)
and portal sessions (``/sessions``).

A key is shown once, in the answer that makes it; lists show its id, name and dates. Revoking takes effect on
the next request that uses it (every request looks its key up in the store). A session is a short-lived
credential of the tenant for a browser (warren/store/sessions.py): minted here, never stored, over at its end.
"""

from __future__ import annotations

import re
import time

from aiohttp import web

from warren.api.admin.requests import access, as_json, path_part, read_body
from warren.api.admin.schemas import TENANT_PATTERN, KeyCreated, KeyIn, KeyList, KeyOut, SessionIn, SessionOut
from warren.api.admin.service import NOT_FOUND
from warren.api.ingest.errors import STORE_UNAVAILABLE, ApiError
from warren.core.moments import iso_utc
from warren.store.api_keys import ApiKey, ApiKeyStore
from warren.store.keys import StoreKeyError
from warren.store.sessions import mint_session

__all__ = ["KEYS", "SESSIONS", "add_tenant_routes"]

KEYS = "/v1/tenants/{tenant}/keys"
SESSIONS = "/v1/tenants/{tenant}/sessions"
_TENANT = re.compile(TENANT_PATTERN)
_KEY_ID = re.compile(r"^[0-9a-f]{16}$")


def _out(key: ApiKey) -> KeyOut:
    return KeyOut(**key.shown(time.time()))


async def _keys(request: web.Request) -> tuple[ApiKeyStore, str]:
    service, caller = await access(request)
    caller.forbid_unless_admin("managing API keys")
    tenant = path_part(request, "tenant", _TENANT, "a tenant name")
    return ApiKeyStore(service.store.engine), tenant


async def _session(request: web.Request) -> web.Response:
    service, caller = await access(request)
    caller.forbid_unless_admin("minting a portal session")
    tenant = path_part(request, "tenant", _TENANT, "a tenant name")
    body = await read_body(request, SessionIn, optional=True)
    expires_at = time.time() + body.ttl
    try:
        token = mint_session(service.store.sealer, tenant, expires_at)
    except StoreKeyError as exc:
        raise ApiError(503, STORE_UNAVAILABLE, f"the endpoint store's keys: {exc}") from exc
    return as_json(SessionOut(tenant=tenant, token=token, expires_at=iso_utc(expires_at) or ""), 201)


async def _create(request: web.Request) -> web.Response:
    keys, tenant = await _keys(request)
    body = await read_body(request, KeyIn, optional=True)
    expires_at = time.time() + body.expires_in if body.expires_in is not None else None
    key, secret = await keys.create(tenant, name=body.name, expires_at=expires_at)
    return as_json(KeyCreated(**_out(key).model_dump(), key=secret), 201)


async def _list(request: web.Request) -> web.Response:
    keys, tenant = await _keys(request)
    return as_json(KeyList(data=[_out(key) for key in await keys.list(tenant)]))


async def _revoke(request: web.Request) -> web.Response:
    keys, tenant = await _keys(request)
    ident = path_part(request, "key_id", _KEY_ID, "a key id (16 hex digits)")
    if await keys.revoke(tenant, ident) is None:
        raise ApiError(404, NOT_FOUND, f"tenant {tenant!r} has no key {ident!r}")
    return web.Response(status=204)


def add_tenant_routes(app: web.Application) -> None:
    app.router.add_post(SESSIONS, _session)
    app.router.add_post(KEYS, _create)
    app.router.add_get(KEYS, _list)
    app.router.add_delete(KEYS + "/{key_id}", _revoke)
