"""The ingest API as an aiohttp application: routes, the auth and error middlewares, and thin handlers.

Order of checks on ``POST /v1/...``: token (401), content type (415), size (413, from Content-Length before
reading), JSON (400), schema and limits (422), a tenant key's tenant (403), the event-type catalog's schemas
(422), event types (422), webhook body size (413), then publish:
202/207 once RabbitMQ confirmed, 409 unroutable, 503 with Retry-After when it did not.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from aiohttp import web
from aiohttp.web_urldispatcher import _default_expect_handler  # sends "100 Continue"; aiohttp has no public name

from warren.api.ingest.accept import (
    IDEMPOTENCY_HEADER,
    Limits,
    batch_key_max_length,
    build_events,
    check_idempotency_key,
    event_ids,
    publish_batch,
    publish_one,
)
from warren.api.ingest.auth import encode_tokens
from warren.api.ingest.batch_count import events_over
from warren.api.ingest.body import check_content_type, invalid, parse_body, too_large
from warren.api.ingest.catalog_source import CATALOG, CatalogSource
from warren.api.ingest.errors import BROKER_UNAVAILABLE, INTERNAL, UNROUTABLE, ApiError, FieldProblem
from warren.api.ingest.eventtypes import TypeFilter
from warren.api.ingest.idempotency import open_idempotency_store
from warren.api.ingest.idempotent import Idempotency
from warren.api.ingest.link import BrokerLink
from warren.api.ingest.openapi import openapi_document
from warren.api.ingest.producers import CALLER_TENANT, PRODUCERS, Producers, confine, scoped_key
from warren.api.ingest.schemas import BatchIn, EventIn
from warren.core.errors import BrokerUnavailable
from warren.topology.config import WarrenConfig
from warren.tracing.carry import attached, carried

__all__ = ["LINK", "create_ingest_app"]

log = logging.getLogger("warren.api")

LINK = web.AppKey("link", BrokerLink)
_LIMITS = web.AppKey("limits", Limits)
_MAX_BODY = web.AppKey("max_body", int)
_BODY_TIMEOUT = web.AppKey("body_timeout", float)
_IDEMPOTENCY = web.AppKey("idempotency", Idempotency)
_OPENAPI = web.AppKey("openapi", bytes)
_EXEMPT: web.AppKey[Callable[[str], bool]] = web.AppKey("exempt")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(body: object, status: int = 200, headers: dict[str, str] | None = None) -> web.Response:
    return web.Response(body=orjson.dumps(body), status=status, headers=headers, content_type="application/json")


@web.middleware
async def _errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every error leaves as the same JSON body; aiohttp's own (404, 405) too, keeping their headers."""
    try:
        return await handler(request)
    except ApiError as exc:
        return _json(exc.body(), exc.status, exc.headers)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        headers = {k: v for k, v in exc.headers.items() if k.lower() in ("allow", "retry-after")}
        code = exc.reason.lower().replace(" ", "_")
        return _json({"error": code, "message": exc.reason}, exc.status, headers)
    except Exception:
        log.exception("unexpected error on %s %s", request.method, request.path)
        return _json({"error": INTERNAL, "message": "internal error (logged by the server)"}, 500)


@web.middleware
async def _callers_trace(request: web.Request, handler: Handler) -> web.StreamResponse:
    """A request's W3C ``traceparent`` is the parent of what it publishes (passed on unchanged with tracing off)."""
    with attached(carried(request.headers)):
        return await handler(request)


@web.middleware
async def _auth(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Producer tokens (or tenants' keys) guard ``/v1/``; probes and the OpenAPI document stay open. The exempt
    paths' routes (the admin API's ``/v1/endpoints``) check their own tokens."""
    if not request.path.startswith("/v1/") or request.app[_EXEMPT](request.path):
        return await handler(request)
    caller = CALLER_TENANT.set(await request.app[PRODUCERS].check(request))
    try:
        return await handler(request)
    finally:
        CALLER_TENANT.reset(caller)


async def _expect(request: web.Request) -> web.StreamResponse | None:
    """``Expect: 100-continue``: refuse a wrong token, content type or a declared size before the body is sent."""
    try:
        await request.app[PRODUCERS].check(request)
        check_content_type(request)
        limit = request.app[_MAX_BODY]
        if request.content_length is not None and request.content_length > limit:
            raise too_large(limit)
    except ApiError as exc:
        return _json(exc.body(), exc.status, exc.headers)
    await _default_expect_handler(request)
    return None


async def _once(
    request: web.Request, key: str | None, raw: bytes, produce: Callable[[], Awaitable[web.Response]]
) -> web.Response:
    """``produce()``, or the stored answer of an earlier request with this key (with an idempotency store)."""
    idempotency = request.app.get(_IDEMPOTENCY)
    if idempotency is None or key is None:
        return await produce()
    return await idempotency.once(request, scoped_key(key, CALLER_TENANT.get()), raw, produce)


async def _publish_event(request: web.Request) -> web.Response:
    limits = request.app[_LIMITS]
    raw: list[bytes] = []
    item = await parse_body(
        request, EventIn, request.app[_MAX_BODY], before=raw.append, timeout=request.app[_BODY_TIMEOUT]
    )
    key = request.headers.get(IDEMPOTENCY_HEADER)
    check_idempotency_key(key)
    [item] = confine([item], CALLER_TENANT.get(), batch=False)

    async def publish() -> web.Response:
        await request.app[CATALOG].check([item], batch=False)
        [event] = build_events([item], event_ids([item], key, batch=False), limits, batch=False)
        event_id = await publish_one(request.app[LINK], event, limits)
        return _json({"id": event_id}, 202)

    return await _once(request, key, raw[0], publish)


async def _publish_batch(request: web.Request) -> web.Response:
    limits = request.app[_LIMITS]
    too_many = invalid([FieldProblem("events", f"at most {limits.max_batch} events per batch (api.max_batch)")])
    raw: list[bytes] = []

    def count_first(body: bytes) -> None:
        if events_over(body, limits.max_batch):
            raise too_many
        raw.append(body)

    batch = await parse_body(
        request, BatchIn, request.app[_MAX_BODY], before=count_first, timeout=request.app[_BODY_TIMEOUT]
    )
    key = request.headers.get(IDEMPOTENCY_HEADER)
    check_idempotency_key(key, max_length=batch_key_max_length(limits.max_batch))
    if len(batch.events) > limits.max_batch:
        raise too_many
    batch = batch.model_copy(update={"events": confine(batch.events, CALLER_TENANT.get(), batch=True)})
    return await _once(request, key, raw[0], lambda: _publish_events(request, batch, key))


async def _publish_events(request: web.Request, batch: BatchIn, key: str | None) -> web.Response:
    limits = request.app[_LIMITS]
    await request.app[CATALOG].check(batch.events, batch=True)
    events = build_events(batch.events, event_ids(batch.events, key, batch=True), limits, batch=True)
    try:
        outcome = await publish_batch(request.app[LINK], events, limits)
    except BrokerUnavailable as exc:
        raise limits.unavailable(f"no event stored: {exc}") from exc
    status = outcome.status
    if status in (409, 503):
        first = outcome.failed[0]["message"]
        error = (
            limits.unavailable(f"no event stored: {first}", outcome.failed)
            if status == 503
            else ApiError(409, UNROUTABLE, f"no event stored: {first}", failed=outcome.failed)
        )
        raise error
    retry = any(f["error"] == BROKER_UNAVAILABLE for f in outcome.failed)
    headers = {"Retry-After": str(limits.retry_after)} if retry else None
    return _json(outcome.body(), status, headers)


async def _healthz(_: web.Request) -> web.Response:
    return _json({"status": "ok"})


async def _readyz(request: web.Request) -> web.Response:
    not_ready = await request.app[LINK].not_ready_reason()
    if not_ready is None:
        return _json({"status": "ready"})
    log.warning("not ready: %s", not_ready.detail)
    headers = {"Retry-After": str(request.app[_LIMITS].retry_after)}
    return _json({"status": "not ready", "reason": not_ready.reason}, 503, headers)


async def _openapi(request: web.Request) -> web.Response:
    return web.Response(body=request.app[_OPENAPI], content_type="application/json")


def create_ingest_app(
    config: WarrenConfig,
    link: BrokerLink | None = None,
    *,
    exempt: Callable[[str], bool] = lambda path: False,
    extend: Callable[[web.Application, dict[str, Any]], None] | None = None,
) -> web.Application:
    """The ingest API's application; it starts ``link`` (made from ``config.broker`` unless given) and closes it
    on cleanup.

    ``exempt`` names the ``/v1/`` paths whose routes check their own tokens (the admin API's); ``extend`` adds
    more routes, and their paths to the OpenAPI document, before the document is frozen (``warren.api.app``).
    """
    api = config.api
    # aiohttp's own cap is a second line behind read_limited; the margin lets ours answer first, in JSON.
    app = web.Application(middlewares=[_errors, _callers_trace, _auth], client_max_size=api.max_body + 1)
    app[LINK] = link or BrokerLink(config.broker)
    app[_EXEMPT] = exempt
    app[_LIMITS] = Limits(
        type_filter=TypeFilter(api.allowed_event_types),
        max_payload=config.delivery.max_payload,
        max_batch=api.max_batch,
        publish_timeout=api.publish_timeout,
        retry_after=api.retry_after,
    )
    app[PRODUCERS] = Producers(encode_tokens(api.tokens))
    app[CATALOG] = CatalogSource(config)
    app[_MAX_BODY] = api.max_body
    app[_BODY_TIMEOUT] = api.body_timeout
    if api.idempotency_store is not None:
        app[_IDEMPOTENCY] = Idempotency(
            open_idempotency_store(api.idempotency_store),
            retention=api.idempotency_retention,
            stale_after=api.publish_timeout + 10.0,
            retry_after=api.retry_after,
        )
    document = openapi_document(
        max_batch=api.max_batch,
        max_body=api.max_body,
        max_payload=config.delivery.max_payload,
        allowed_event_types=api.allowed_event_types,
        idempotency_store=api.idempotency_store is not None,
    )
    if extend is not None:
        extend(app, document)
    app[_OPENAPI] = orjson.dumps(document)
    app.router.add_post("/v1/events", _publish_event, expect_handler=_expect)
    app.router.add_post("/v1/events/batch", _publish_batch, expect_handler=_expect)
    app.router.add_get("/healthz", _healthz)
    app.router.add_get("/readyz", _readyz)
    app.router.add_get("/openapi.json", _openapi)

    async def start_link(app: web.Application) -> None:
        if _IDEMPOTENCY in app:
            await app[_IDEMPOTENCY].store.open()
        await app[LINK].start()

    async def close_link(app: web.Application) -> None:
        await app[LINK].close()
        if _IDEMPOTENCY in app:
            await app[_IDEMPOTENCY].store.close()

    app.on_startup.append(start_link)
    app.on_cleanup.append(close_link)
    return app
