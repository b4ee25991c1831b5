"""The admin API's event-type catalog: ``/v1/event-types``. Everyone with a credential reads it (admin tokens,
tenants' keys and sessions: a platform's customers see what they may subscribe to); admin tokens change it.

``GET /v1/event-types`` lists every version of every type (``format=jsonschema`` or ``format=asyncapi`` for the
exports a platform puts in its docs); ``PUT /v1/event-types/{name}`` adds or replaces one version;
``DELETE /v1/event-types/{name}`` removes one version (``?version=N``) or all. The file's ``[[event_types]]``
are read-only here (409 ``file_managed``): change them in the file.
"""

from __future__ import annotations

import re

from aiohttp import web
from pydantic import ValidationError

from warren.api.admin.requests import INVALID_REQUEST, access, as_json, path_part, read_body
from warren.api.admin.schemas import EventTypeIn, EventTypeList, EventTypeOut
from warren.api.admin.service import FILE_MANAGED, NOT_FOUND
from warren.api.ingest.body import invalid, validation_problems
from warren.api.ingest.catalog_source import CATALOG
from warren.api.ingest.errors import ApiError
from warren.store.event_types import EventTypeStore
from warren.topology.catalog import TYPE_PATTERN, EventTypeSpec, asyncapi_document, json_schema_bundle

__all__ = ["EVENT_TYPES", "add_event_type_routes"]

EVENT_TYPES = "/v1/event-types"
_TYPE = re.compile(TYPE_PATTERN)


def _out(spec: EventTypeSpec, managed_by: str) -> EventTypeOut:
    return EventTypeOut(**spec.model_dump(), managed_by=managed_by)


async def _list(request: web.Request) -> web.Response:
    await access(request)  # any credential: tenants read the catalog too
    source = request.app[CATALOG]
    source.stale()
    catalog = await source.current()
    shape = request.query.get("format", "list")
    if shape == "jsonschema":
        return web.json_response(json_schema_bundle(catalog.specs))
    if shape == "asyncapi":
        return web.json_response(asyncapi_document(catalog.specs))
    if shape != "list":
        raise ApiError(422, INVALID_REQUEST, "format is list, jsonschema or asyncapi")
    in_file = {(s.name, s.version) for s in source.config.event_types}
    data = [_out(s, "file" if (s.name, s.version) in in_file else "api") for s in catalog.specs]
    return as_json(EventTypeList(data=data))


def _name(request: web.Request) -> str:
    return path_part(request, "name", _TYPE, "an event type (words of letters, digits, '_-:/' between dots)")


async def _put(request: web.Request) -> web.Response:
    service, caller = await access(request)
    caller.forbid_unless_admin("changing the event-type catalog")
    name = _name(request)
    body = await read_body(request, EventTypeIn)
    try:
        spec = EventTypeSpec.model_validate({"name": name, **body.model_dump(exclude_none=True)})
    except ValidationError as exc:
        error = invalid(validation_problems(exc))
        error.code = INVALID_REQUEST
        raise error from None
    source = request.app[CATALOG]
    if any((s.name, s.version) == (spec.name, spec.version) for s in source.config.event_types):
        raise ApiError(409, FILE_MANAGED, f"{name!r} version {spec.version} comes from the configuration file")
    new = await EventTypeStore(service.store.engine).put(spec)
    source.stale()
    return as_json(_out(spec, "api"), 201 if new else 200)


async def _delete(request: web.Request) -> web.Response:
    service, caller = await access(request)
    caller.forbid_unless_admin("changing the event-type catalog")
    name = _name(request)
    version_text = request.query.get("version")
    version = None
    if version_text is not None:
        if not version_text.isascii() or not version_text.isdigit() or not 1 <= int(version_text) <= 1000:
            raise ApiError(422, INVALID_REQUEST, "version is a whole number from 1 to 1000")
        version = int(version_text)
    removed = await EventTypeStore(service.store.engine).remove(name, version)
    if not removed:
        which = f" version {version}" if version is not None else ""
        raise ApiError(404, NOT_FOUND, f"no event type {name!r}{which} declared through the API")
    request.app[CATALOG].stale()
    return web.Response(status=204)


def add_event_type_routes(app: web.Application) -> None:
    app.router.add_get(EVENT_TYPES, _list)
    app.router.add_put(EVENT_TYPES + "/{name}", _put)
    app.router.add_delete(EVENT_TYPES + "/{name}", _delete)
