"""The admin API's routes on the ``warren api`` application: ``/v1/endpoints`` and below, behind admin tokens.

Enabled when both ``store.url`` and ``api.admin_tokens`` are set. The store is opened (and migrated) on the
first admin request, so the ingest API serves events even while the store is unreachable; a request that
needs the store then gets 503 ``store_unavailable``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable
from dataclasses import asdict
from datetime import UTC, datetime
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError
from sqlalchemy.ext.asyncio import AsyncEngine

from warren.api.admin.applier import EndpointApplier
from warren.api.admin.paths import ADMIN_PREFIX, EVENT_ATTEMPTS, admin_enabled, is_admin_path
from warren.api.admin.schemas import (
    EVENT_ID_PATTERN,
    NAME_PATTERN,
    AttemptOut,
    AttemptPage,
    AttemptQuery,
    EndpointCreated,
    EndpointIn,
    EndpointOut,
    EndpointPage,
    EndpointPatch,
    EventAttempts,
    ListQuery,
    RecoverOut,
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
from warren.api.admin.service import EndpointService, delivered
from warren.api.ingest.auth import check_authorization, encode_tokens
from warren.api.ingest.body import invalid, parse_body, validation_problems
from warren.api.ingest.errors import INVALID, STORE_UNAVAILABLE, ApiError, FieldProblem
from warren.broker.dlq.selection import parse_moment
from warren.core.errors import WarrenError
from warren.core.moments import iso_utc
from warren.store.attempt_records import AttemptEntry
from warren.store.attempts import AttemptLog
from warren.store.records import StoredEndpoint
from warren.store.repository import UNREACHABLE, EndpointStore
from warren.topology.config import WarrenConfig

__all__ = ["ADMIN_PREFIX", "SERVICE", "add_admin_routes", "admin_enabled", "is_admin_path"]

log = logging.getLogger("warren.api.admin")

INVALID_REQUEST = "invalid_request"
# The answer to a DELETE: what it discarded (only ``force`` discards): events still queued, and dead letters.
DISCARDED_QUEUED = "Warren-Discarded-Queued"
DISCARDED_DEAD_LETTERS = "Warren-Discarded-Dead-Letters"
SWEEP_INTERVAL = 30.0  # seconds between checks for rotated-out secrets whose grace period is over

M = TypeVar("M", bound=BaseModel)

_EVENT_ID = re.compile(EVENT_ID_PATTERN)
_NAME = re.compile(NAME_PATTERN)


class _Handle:
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


SERVICE = web.AppKey("admin_service", _Handle)
_ADMIN_TOKENS = web.AppKey("admin_tokens", tuple[bytes, ...])
_MAX_BODY = web.AppKey("admin_max_body", int)


def _json(model: BaseModel, status: int = 200) -> web.Response:
    return web.Response(body=model.model_dump_json().encode(), status=status, content_type="application/json")


def _out(stored: StoredEndpoint, state: str) -> dict[str, Any]:
    return {
        **stored.fields(),
        "state": state,
        "created_at": iso_utc(stored.created_at),
        "updated_at": iso_utc(stored.updated_at),
        "secrets": [
            SecretInfo(created_at=iso_utc(s.created_at) or "", expires_at=iso_utc(s.expires_at)) for s in stored.secrets
        ],
    }


async def _body(request: web.Request, model: type[M], *, optional: bool = False) -> M:
    """The JSON body as ``model``; with ``optional``, no body at all is the model's defaults."""
    if optional and not request.body_exists:
        return model()
    try:
        return await parse_body(request, model, request.app[_MAX_BODY])
    except ApiError as exc:
        if exc.code == INVALID:
            exc.code = INVALID_REQUEST
        raise


async def _service(request: web.Request) -> EndpointService:
    tokens: tuple[bytes, ...] = request.app[_ADMIN_TOKENS]
    check_authorization(request.headers.get("Authorization"), tokens)
    return await request.app[SERVICE].get()


def _name(request: web.Request) -> str:
    return request.match_info["name"]


async def _list(request: web.Request) -> web.Response:
    service = await _service(request)
    query = _query(request, ListQuery)
    page = await service.list_endpoints(
        tenant=query.tenant,
        state=query.state,
        event_type=query.event_type,
        managed_by=query.managed_by,
        limit=query.limit,
        cursor=query.cursor,
    )
    data = [EndpointOut(**_out(stored, state)) for stored, state in page.endpoints]
    return _json(EndpointPage(data=data, next_cursor=page.next_cursor))


async def _create(request: web.Request) -> web.Response:
    service = await _service(request)
    body = await _body(request, EndpointIn)
    data = body.model_dump(exclude_none=True, exclude={"tenant"})
    stored, secret = await service.create(data, tenant=body.tenant)
    state = (await service.states([stored.name]))[stored.name]
    return _json(EndpointCreated(**_out(stored, state), secret=secret), 201)


async def _read(request: web.Request) -> web.Response:
    service = await _service(request)
    stored = await service.get(_name(request))
    state = (await service.states([stored.name]))[stored.name]
    return _json(EndpointOut(**_out(stored, state)))


async def _update(request: web.Request) -> web.Response:
    service = await _service(request)
    body = await _body(request, EndpointPatch)
    changes = body.model_dump(exclude_unset=True, exclude={"tenant"})  # null: back to the default
    tenant: str | bool | None = body.tenant if "tenant" in body.model_fields_set else False
    stored = await service.update(_name(request), changes, tenant=tenant)
    state = (await service.states([stored.name]))[stored.name]
    return _json(EndpointOut(**_out(stored, state)))


async def _delete(request: web.Request) -> web.Response:
    service = await _service(request)
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
    service = await _service(request)
    body = await _body(request, RotateIn, optional=True)
    stored, secret = await service.rotate(_name(request), secret=body.secret, grace=body.grace)
    infos = _out(stored, "")["secrets"]
    return _json(Rotated(name=stored.name, secret=secret, secrets=infos))


async def _reveal(request: web.Request) -> web.Response:
    service = await _service(request)
    secrets = await service.reveal(_name(request))
    shown = [
        RevealedSecret(secret=s.text, created_at=iso_utc(s.created_at) or "", expires_at=iso_utc(s.expires_at))
        for s in secrets
    ]
    return _json(RevealedSecrets(name=_name(request), secrets=shown))


def _state_change(action: str) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def change(request: web.Request) -> web.Response:
        service = await _service(request)
        body = await _body(request, StateIn, optional=True)
        state, changed = await service.set_state(_name(request), action, body.reason)
        return _json(StateOut(name=_name(request), state=state, changed=changed))

    return change


async def _test(request: web.Request) -> web.Response:
    service = await _service(request)
    body = await _body(request, TestIn, optional=True)
    try:
        outcome = await service.test(_name(request), body.type, body.data)
    except WarrenError as exc:
        if isinstance(exc, ApiError):
            raise
        raise ApiError(409, "cannot_send", f"the test event was not sent: {exc}") from exc
    result = outcome.result
    return _json(
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


def _attempt(entry: AttemptEntry) -> AttemptOut:
    return AttemptOut(**{**asdict(entry), "at": iso_utc(entry.at) or "", "failed": entry.failed})


def _query(request: web.Request, model: type[M]) -> M:
    try:
        return model.model_validate(dict(request.query))
    except ValidationError as exc:
        error = invalid(validation_problems(exc))
        error.code = INVALID_REQUEST
        raise error from None


def _path_part(request: web.Request, name: str, pattern: re.Pattern[str], what: str) -> str:
    value = request.match_info[name]
    if not pattern.fullmatch(value):
        raise ApiError(422, INVALID_REQUEST, f"{name}: not {what}", [FieldProblem(name, f"not {what}")])
    return value


async def _event_attempts(request: web.Request) -> web.Response:
    service = await _service(request)
    event_id = _path_part(request, "event_id", _EVENT_ID, "an event id (1-200 letters, digits, '_-.:')")
    entries = await AttemptLog(service.store.engine).for_event(event_id)
    return _json(EventAttempts(event_id=event_id, data=[_attempt(e) for e in entries]))


async def _endpoint_attempts(request: web.Request) -> web.Response:
    service = await _service(request)
    query = _query(request, AttemptQuery)
    name = _path_part(request, "name", _NAME, "an endpoint name")
    try:
        page = await AttemptLog(service.store.engine).for_endpoint(
            name,
            failed_only=query.status == "failed",
            since=query.since,
            until=query.until,
            limit=query.limit,
            cursor=query.cursor,
        )
    except ValueError as exc:
        raise ApiError(422, INVALID_REQUEST, str(exc), [FieldProblem("cursor", str(exc))]) from None
    return _json(AttemptPage(data=[_attempt(e) for e in page.entries], next_cursor=page.next_cursor))


async def _recover(request: web.Request) -> web.Response:
    service = await _service(request)
    since = request.query.get("since")
    if not since:
        raise ApiError(422, INVALID_REQUEST, "since is required: an ISO 8601 time or a duration ago (1h)")
    try:
        since_ms = parse_moment(since, datetime.now(UTC))
    except (ValueError, OverflowError) as exc:
        raise ApiError(422, INVALID_REQUEST, f"since: {exc}") from None
    report = await service.recover(_name(request), since_ms)
    return _json(
        RecoverOut(
            name=_name(request),
            since=iso_utc(since_ms / 1000) or "",
            recovered=report.moved,
            dlq_depth=report.depth,
            scanned=report.scanned,
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
    handle = app[SERVICE] = _Handle(config, applier)
    app[_ADMIN_TOKENS] = encode_tokens(config.api.admin_tokens)
    app[_MAX_BODY] = config.api.max_body
    router = app.router
    router.add_get(ADMIN_PREFIX, _list)
    router.add_post(ADMIN_PREFIX, _create)
    router.add_get(ADMIN_PREFIX + "/{name}", _read)
    router.add_patch(ADMIN_PREFIX + "/{name}", _update)
    router.add_delete(ADMIN_PREFIX + "/{name}", _delete)
    router.add_post(ADMIN_PREFIX + "/{name}/rotate-secret", _rotate)
    router.add_get(ADMIN_PREFIX + "/{name}/secret", _reveal)
    for action in ("pause", "resume", "disable", "enable"):
        router.add_post(ADMIN_PREFIX + "/{name}/" + action, _state_change(action))
    router.add_post(ADMIN_PREFIX + "/{name}/test", _test)
    router.add_get(ADMIN_PREFIX + "/{name}/attempts", _endpoint_attempts)
    router.add_get(EVENT_ATTEMPTS, _event_attempts)
    router.add_post(ADMIN_PREFIX + "/{name}/recover", _recover)

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
