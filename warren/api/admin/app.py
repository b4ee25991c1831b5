"""The admin API's routes on the ``warren api`` application: ``/v1/endpoints`` and below, behind admin tokens
or a tenant's API key (confined to that tenant: warren/api/admin/requests.py).

Enabled when both ``store.url`` and ``api.admin_tokens`` are set. The store is opened (and migrated) on the
first admin request, so the ingest API serves events even while the store is unreachable; a request that
needs the store then gets 503 ``store_unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from sqlalchemy.ext.asyncio import AsyncEngine

from warren.api.admin.applier import EndpointApplier
from warren.api.admin.attempt_routes import endpoint_attempts, event_attempts, recover, replay
from warren.api.admin.event_type_routes import add_event_type_routes
from warren.api.admin.key_choice import shown_keys
from warren.api.admin.key_schemas import PublicKeyInfo, PublicKeys
from warren.api.admin.paths import ADMIN_PREFIX, EVENT_ATTEMPTS, admin_enabled, is_admin_path
from warren.api.admin.requests import (
    ADMIN_TOKENS,
    INVALID_REQUEST,
    MAX_BODY,
    SERVICE,
    ServiceHandle,
    access,
    as_json,
    key_lookup,
    read_body,
    read_query,
    stored_event_types,
)
from warren.api.admin.schemas import (
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointPatch,
    ListQuery,
    RevealedSecret,
    RevealedSecrets,
    Rotated,
    RotateIn,
    SecretInfo,
    StateIn,
    StateOut,
    TestIn,
    TestOut,
)
from warren.api.admin.service import delivered
from warren.api.admin.tenant_routes import add_tenant_routes
from warren.api.ingest.auth import encode_tokens
from warren.api.ingest.catalog_source import CATALOG
from warren.api.ingest.errors import ApiError
from warren.api.ingest.producers import PRODUCERS
from warren.api.portal.routes import add_portal_routes
from warren.core.errors import WarrenError
from warren.core.moments import iso_utc
from warren.store.records import StoredEndpoint
from warren.store.repository import UNREACHABLE
from warren.topology.config import WarrenConfig

__all__ = ["ADMIN_PREFIX", "SERVICE", "add_admin_routes", "admin_enabled", "is_admin_path"]

log = logging.getLogger("warren.api.admin")

# The answer to a DELETE: what it discarded (only ``force`` discards): events still queued, and dead letters.
DISCARDED_QUEUED = "Warren-Discarded-Queued"
DISCARDED_DEAD_LETTERS = "Warren-Discarded-Dead-Letters"
SWEEP_INTERVAL = 30.0  # seconds between checks for rotated-out secrets whose grace period is over


def _out(stored: StoredEndpoint, state: str) -> dict[str, Any]:
    return {
        **stored.fields(),
        "state": state,
        "created_at": iso_utc(stored.created_at),
        "updated_at": iso_utc(stored.updated_at),
        "secrets": [
            SecretInfo(
                created_at=iso_utc(s.created_at) or "",
                expires_at=iso_utc(s.expires_at),
                scheme=s.scheme,
                public_key=s.public_key,
            )
            for s in stored.secrets
        ],
    }


def _name(request: web.Request) -> str:
    return request.match_info["name"]


async def _list(request: web.Request) -> web.Response:
    service, caller = await access(request)
    query = read_query(request, ListQuery)
    page = await service.list_endpoints(
        tenant=caller.tenant_given(query.tenant),
        state=query.state,
        event_type=query.event_type,
        managed_by=query.managed_by,
        limit=query.limit,
        cursor=query.cursor,
    )
    data = [EndpointOut(**_out(stored, state)) for stored, state in page.endpoints]
    return as_json(EndpointPage(data=data, next_cursor=page.next_cursor))


async def _create(request: web.Request) -> web.Response:
    service, caller = await access(request)
    body = await read_body(request, EndpointIn)
    data = body.model_dump(exclude_none=True, exclude={"tenant"})
    if "proxy" in data:  # the egress path is the operator's: a tenant's key neither picks nor bypasses a proxy
        caller.forbid_unless_admin("choosing an endpoint's egress proxy")
    stored, secrets = await service.create(data, tenant=caller.tenant_given(body.tenant))
    state = (await service.states([stored.name]))[stored.name]
    return as_json(EndpointCreated(**_out(stored, state), **shown_keys(secrets)), 201)


async def _read(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    stored = await service.get(_name(request))
    state = (await service.states([stored.name]))[stored.name]
    return as_json(EndpointOut(**_out(stored, state)))


async def _update(request: web.Request) -> web.Response:
    service, caller = await access(request, _name(request))
    body = await read_body(request, EndpointPatch)
    changes = body.model_dump(exclude_unset=True, exclude={"tenant"})  # null: back to the default
    tenant: str | bool | None = body.tenant if "tenant" in body.model_fields_set else False
    if caller.tenant is not None and tenant not in (False, caller.tenant):
        caller.forbid_unless_admin("moving an endpoint to another tenant")
    if "proxy" in changes:
        caller.forbid_unless_admin("choosing an endpoint's egress proxy")
    stored = await service.update(_name(request), changes, tenant=tenant)
    state = (await service.states([stored.name]))[stored.name]
    return as_json(EndpointOut(**_out(stored, state)))


async def _delete(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    force = request.query.get("force", "false")
    if force not in ("true", "false"):
        raise ApiError(422, INVALID_REQUEST, "force is true or false")
    removal = await service.delete(_name(request), force=force == "true")
    # 204 as before; what force discarded is counted in two headers, so that a deletion never drops silently.
    return web.Response(
        status=204,
        headers={DISCARDED_QUEUED: str(removal.queued), DISCARDED_DEAD_LETTERS: str(removal.dead_letters)},
    )


async def _rotate(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    body = await read_body(request, RotateIn, optional=True)
    stored, secret = await service.rotate(_name(request), secret=body.secret, grace=body.grace, kind=body.kind)
    infos = _out(stored, "")["secrets"]
    return as_json(Rotated(name=stored.name, secrets=infos, **shown_keys([secret])))


async def _public_keys(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    keys = await service.public_keys(_name(request))
    shown = [
        PublicKeyInfo(
            public_key=k.public_key or "",
            created_at=iso_utc(k.created_at) if k.created_at else None,  # a file key: no moment of its own
            expires_at=iso_utc(k.expires_at),
        )
        for k in keys
    ]
    return as_json(PublicKeys(name=_name(request), keys=shown))


async def _reveal(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    secrets = await service.reveal(_name(request))
    shown = [
        RevealedSecret(secret=s.text, created_at=iso_utc(s.created_at) or "", expires_at=iso_utc(s.expires_at))
        for s in secrets
    ]
    return as_json(RevealedSecrets(name=_name(request), secrets=shown))


def _state_change(action: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def change(request: web.Request) -> web.Response:
        service, _ = await access(request, _name(request))
        body = await read_body(request, StateIn, optional=True)
        state, changed = await service.set_state(_name(request), action, body.reason)
        return as_json(StateOut(name=_name(request), state=state, changed=changed))

    return change


async def _test(request: web.Request) -> web.Response:
    service, _ = await access(request, _name(request))
    body = await read_body(request, TestIn, optional=True)
    try:
        outcome = await service.test(_name(request), body.type, body.data)
    except WarrenError as exc:
        if isinstance(exc, ApiError):
            raise
        raise ApiError(409, "cannot_send", f"the test event was not sent: {exc}") from exc
    result = outcome.result
    return as_json(
        TestOut(
            event_id=outcome.event_id,
            delivered=delivered(result),
            outcome=result.outcome.value,
            status=result.status,
            duration_ms=round(result.duration * 1000, 3),
            error=result.error or (None if delivered(result) else result.reason),
            response=result.excerpt,
        )
    )


async def _sweep(app: web.Application) -> None:
    """Every SWEEP_INTERVAL: drop from the store the rotated-out secrets whose grace period is over (workers
    stopped signing with them at their end by themselves; this only tidies the store)."""
    while True:
        await asyncio.sleep(SWEEP_INTERVAL)
        handle = app[SERVICE]
        if handle.service is None:
            continue
        try:
            expired = await handle.service.expire_secrets()
        except (WarrenError, *UNREACHABLE) as exc:
            log.warning("expired secrets not dropped from the store yet: %s", exc)
            continue
        if expired:
            log.info("dropped the expired secrets of %s from the store", ", ".join(expired))


def add_admin_routes(
    app: web.Application, config: WarrenConfig, applier: EndpointApplier | None = None
) -> Callable[[], Awaitable[AsyncEngine]]:
    """The admin routes on ``app`` (the ingest API's); they close their store on the app's cleanup. Returns how
    to reach the store's engine once it is open, for what shares it (the attempt log's writer)."""
    handle = app[SERVICE] = ServiceHandle(config, applier)
    app[ADMIN_TOKENS] = encode_tokens(config.api.admin_tokens)
    app[MAX_BODY] = config.api.max_body
    router = app.router
    router.add_get(ADMIN_PREFIX, _list)
    router.add_post(ADMIN_PREFIX, _create)
    router.add_get(ADMIN_PREFIX + "/{name}", _read)
    router.add_patch(ADMIN_PREFIX + "/{name}", _update)
    router.add_delete(ADMIN_PREFIX + "/{name}", _delete)
    router.add_post(ADMIN_PREFIX + "/{name}/rotate-secret", _rotate)
    router.add_get(ADMIN_PREFIX + "/{name}/secret", _reveal)
    router.add_get(ADMIN_PREFIX + "/{name}/public-keys", _public_keys)
    for action in ("pause", "resume", "disable", "enable"):
        router.add_post(ADMIN_PREFIX + "/{name}/" + action, _state_change(action))
    router.add_post(ADMIN_PREFIX + "/{name}/test", _test)
    router.add_get(ADMIN_PREFIX + "/{name}/attempts", endpoint_attempts)
    router.add_get(EVENT_ATTEMPTS, event_attempts)
    router.add_post(ADMIN_PREFIX + "/{name}/recover", recover)
    router.add_post(ADMIN_PREFIX + "/{name}/replay", replay)
    add_tenant_routes(app)
    add_event_type_routes(app)
    app[CATALOG].load = stored_event_types(handle)  # the ingest checks the API's event types too
    if config.portal.enabled:
        add_portal_routes(app, config.portal)
    app[PRODUCERS].tenant_keys = key_lookup(handle)  # tenants' keys publish their own events on ingest

    async def sweeping(app: web.Application) -> Any:
        try:  # open (and migrate) the store now; if it is down, the first admin request tries again
            await app[SERVICE].get()
        except ApiError as exc:
            log.warning("%s; the admin API answers 503 until it is reachable", exc)
        task = asyncio.create_task(_sweep(app), name="warren-admin-sweep")
        yield
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await app[SERVICE].close()

    app.cleanup_ctx.append(sweeping)

    async def engine() -> AsyncEngine:
        return (await handle.get()).store.engine

    return engine
