"""What every admin route does with its request: who calls (an admin token or a tenant's key), the service
made on first use, the body and query read as models, and the JSON answer.

A caller is a platform admin (``api.admin_tokens``: every tenant) or a tenant (a key of
warren/store/api_keys.py, or a portal session of warren/store/sessions.py: that tenant only). A tenant asking
for another tenant's endpoint gets the same 404 as for one that does not exist, so a key learns nothing of the
names other tenants use.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from warren.api.admin.applier import EndpointApplier
from warren.api.admin.service import EndpointService, not_found
from warren.api.ingest.auth import bearer_token, challenge, token_matches
from warren.api.ingest.body import invalid, parse_body, validation_problems
from warren.api.ingest.errors import INVALID, STORE_UNAVAILABLE, ApiError, FieldProblem
from warren.store.api_keys import ApiKeyStore, key_id
from warren.store.event_types import EventTypeStore
from warren.store.keys import StoreKeyError
from warren.store.records import StoredEndpoint
from warren.store.repository import UNREACHABLE, EndpointStore
from warren.store.sessions import SESSION_PREFIX, session_tenant
from warren.topology.catalog import EventTypeSpec
from warren.topology.config import WarrenConfig

__all__ = [
    "ADMIN_TOKENS",
    "FORBIDDEN",
    "INVALID_REQUEST",
    "MAX_BODY",
    "SERVICE",
    "Caller",
    "ServiceHandle",
    "access",
    "as_json",
    "key_lookup",
    "path_part",
    "read_body",
    "read_query",
    "stored_event_types",
]

INVALID_REQUEST = "invalid_request"
FORBIDDEN = "forbidden"

M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Caller:
    """Who makes a request: ``tenant`` None for a platform admin, else the tenant a key is confined to."""

    tenant: str | None = None

    def forbid_unless_admin(self, what: str) -> None:
        if self.tenant is not None:
            raise ApiError(403, FORBIDDEN, f"{what} needs an admin token (api.admin_tokens), not a tenant's key")

    def owns(self, stored: StoredEndpoint) -> None:
        """404, as for a name that does not exist, when a tenant asks for an endpoint that is not its own."""
        if self.tenant is not None and stored.tenant != self.tenant:
            raise not_found(stored.name)

    def tenant_given(self, tenant: str | None) -> str | None:
        """The tenant a request names, checked: a tenant's key names its own (or none: its own is meant)."""
        if self.tenant is None:
            return tenant
        if tenant is not None and tenant != self.tenant:
            raise ApiError(403, FORBIDDEN, f"a key of tenant {self.tenant!r} acts for that tenant only")
        return self.tenant


class ServiceHandle:
    """The service, made on first use (the store opened and migrated then), or a 503 while it cannot be."""

    def __init__(self, config: WarrenConfig, applier: EndpointApplier | None) -> None:
        self.config = config
        self.applier = applier
        self.service: EndpointService | None = None
        self._lock = asyncio.Lock()

    async def get(self) -> EndpointService:
        if self.service is not None:
            return self.service
        async with self._lock:
            if self.service is None:
                try:
                    store = await EndpointStore.open(self.config.store)
                except UNREACHABLE as exc:
                    raise ApiError(503, STORE_UNAVAILABLE, f"the endpoint store is unavailable: {exc}") from exc
                self.service = EndpointService(self.config, store, self.applier)
            return self.service

    async def close(self) -> None:
        if self.service is not None:
            await self.service.close()
            await self.service.store.close()
            self.service = None


SERVICE = web.AppKey("admin_service", ServiceHandle)
ADMIN_TOKENS = web.AppKey("admin_tokens", tuple[bytes, ...])
MAX_BODY = web.AppKey("admin_max_body", int)


async def _tenant_of(service: EndpointService, key: str) -> str | None:
    try:
        return await ApiKeyStore(service.store.engine).tenant_of(key)
    except UNREACHABLE as exc:
        raise ApiError(503, STORE_UNAVAILABLE, f"the endpoint store is unavailable: {exc}") from exc


def _session_tenant(service: EndpointService, token: str) -> str | None:
    try:
        return session_tenant(service.store.sealer, token, time.time())
    except StoreKeyError:  # no keys: no session could have been minted
        return None


def stored_event_types(handle: ServiceHandle) -> Callable[[], Awaitable[tuple[EventTypeSpec, ...]]]:
    """How the ingest API reads the event types declared through the admin API (warren/api/ingest/catalog_source.py)."""

    async def load() -> tuple[EventTypeSpec, ...]:
        return await EventTypeStore((await handle.get()).store.engine).all()

    return load


def key_lookup(handle: ServiceHandle) -> Callable[[str], Awaitable[str | None]]:
    """How the ingest API finds a key's tenant (warren/api/ingest/producers.py): only something of a key's form
    opens the store; a store that cannot be reached is a 503."""

    async def tenant_of(key: str) -> str | None:
        if key_id(key) is None:
            return None
        return await _tenant_of(await handle.get(), key)

    return tenant_of


async def access(request: web.Request, name: str | None = None) -> tuple[EndpointService, Caller]:
    """The service and the request's caller (an admin token, or an active key of a tenant; 401 otherwise);
    with ``name``, the endpoint must be the caller's to see (404). Admin tokens are checked before the store is
    opened: a request with a wrong token is a 401 even while the store is down."""
    given = bearer_token(request.headers.get("Authorization"))
    if given is None:
        raise challenge(None)
    tokens: tuple[bytes, ...] = request.app[ADMIN_TOKENS]
    admin = token_matches(given, tokens)
    session = given.startswith(SESSION_PREFIX)
    if not admin and not session and key_id(given) is None:
        raise challenge(given)
    service = await request.app[SERVICE].get()
    if admin:
        return service, Caller()
    tenant = _session_tenant(service, given) if session else await _tenant_of(service, given)
    if tenant is None:
        raise challenge(given)
    caller = Caller(tenant)
    if name is not None:
        caller.owns(await service.get(name))
    return service, caller


def as_json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(body=model.model_dump_json().encode(), status=status, content_type="application/json")


async def read_body(request: web.Request, model: type[M], *, optional: bool = False) -> M:
    """The JSON body as ``model``; with ``optional``, no body at all is the model's defaults."""
    if optional and not request.body_exists:
        return model()
    try:
        return await parse_body(request, model, request.app[MAX_BODY])
    except ApiError as exc:
        if exc.code == INVALID:
            exc.code = INVALID_REQUEST
        raise


def read_query(request: web.Request, model: type[M]) -> M:
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        error = invalid(validation_problems(exc))
        error.code = INVALID_REQUEST
        raise error from None


def path_part(request: web.Request, name: str, pattern: re.Pattern[str], what: str) -> str:
    value = request.match_info[name]
    if not pattern.fullmatch(value):
        raise ApiError(422, INVALID_REQUEST, f"{name}: not {what}", [FieldProblem(name, f"not {what}")])
    return value
